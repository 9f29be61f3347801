//! gRPC answers ([`GrpcResponder`]: the mapping is in its docs).

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

use crate::refusal::Refusal;
use crate::response::Responder;

/// Whether a request is a gRPC call: its `content-type` is `application/grpc`, alone or
/// with a `+format` or parameters.
#[inline]
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// Answers a refused gRPC call with a trailers-only response, built from the
/// [`Refusal`] itself. The layer uses it for every gRPC call it refuses; a [`Responder`] of
/// your own can hand it a refusal too.
///
/// gRPC answers: a request whose `content-type` is `application/grpc` (or `+proto`, …) is
/// answered as gRPC, never with an HTML redirect or a JSON body. Every refusal the layer
/// makes is answered by [`GrpcResponder`], built from the [`Refusal`] (nothing rendered for
/// HTTP is parsed back): a trailers-only response, HTTP 200, `content-type:
/// application/grpc`, `grpc-status` and `grpc-message` in the headers, the rate-limit
/// headers kept as response metadata, and for a refusal or an unavailable store a
/// `google.rpc.RetryInfo` with the wait in `grpc-status-details-bin` (a `google.rpc.Status`,
/// base64), and the same wait in `grpc-retry-pushback-ms` (what gRPC's retry policy reads:
/// its clients wait that long before a retry, where they never read `RetryInfo`). An
/// admitted call's own response gets the rate-limit headers as its metadata.
///
/// `grpc-message` is the status's text and the refusal's stable code, `rate limit exceeded
/// (limit.exceeded)`.
///
/// | refusal's HTTP status | gRPC status |
/// |---|---|
/// | 429 (limited, banned, in flight, a held line full) | 8 `RESOURCE_EXHAUSTED`, with `RetryInfo` |
/// | 503 (the store failed under a closed policy) | 14 `UNAVAILABLE`, with `RetryInfo` |
/// | 401 (no credentials for the principal) | 16 `UNAUTHENTICATED` |
/// | 400 (the principal cannot be named) | 3 `INVALID_ARGUMENT` |
/// | 403 (a deny list, a ban answered 403) | 7 `PERMISSION_DENIED` |
/// | 500 (an operator's error) | 13 `INTERNAL` |
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcResponder;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_PUSHBACK: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");
const GRPC_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

impl Responder for GrpcResponder {
    fn respond(&self, refusal: &Refusal) -> Response<Bytes> {
        let (code, text) = status_of(refusal.status());
        let mut r = Response::new(Bytes::new());
        // Room for these five and the layer's four (rate-limit fields, `Retry-After`): the
        // map is allocated once.
        *r.headers_mut() = HeaderMap::with_capacity(12);
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert(GRPC_STATUS, status_value(code));
        let message = message_of(text, refusal.code());
        let wait = refusal
            .retry_after_secs()
            .filter(|_| matches!(code, 8 | 14));
        if let Some(secs) = wait {
            // gRPC's own retry policy waits for this header (it never reads `RetryInfo`).
            let (pushback, details) = waits(code, &message, secs);
            h.insert(GRPC_PUSHBACK, pushback);
            if let Some(details) = details {
                h.insert(GRPC_DETAILS, details);
            }
        }
        h.insert(GRPC_MESSAGE, message);
        r
    }
}

/// `grpc-status` for one of the statuses the layer answers, without rendering a number.
fn status_value(code: u32) -> HeaderValue {
    HeaderValue::from_static(match code {
        3 => "3",
        7 => "7",
        8 => "8",
        13 => "13",
        14 => "14",
        16 => "16",
        _ => "2",
    })
}

/// The last wait's `grpc-retry-pushback-ms` and `grpc-status-details-bin`, by status,
/// message and seconds: a flood of refusals tells one wait many times, and its encoded
/// `Status` is the same each time (the rate-limit fields are cached alike).
type Waits = (u32, u64, HeaderValue, HeaderValue, Option<HeaderValue>);

thread_local! {
    static LAST_WAIT: std::cell::RefCell<Option<Waits>> = const { std::cell::RefCell::new(None) };
}

/// The wait's two headers: `secs` in milliseconds, and the `google.rpc.Status` with its
/// `RetryInfo`, base64 (`None` should it not make a header value).
fn waits(code: u32, message: &HeaderValue, secs: u64) -> (HeaderValue, Option<HeaderValue>) {
    LAST_WAIT.with_borrow_mut(|last| {
        if let Some((c, s, m, pushback, details)) = last.as_ref()
            && (*c, *s) == (code, secs)
            && m.as_bytes() == message.as_bytes()
        {
            return (pushback.clone(), details.clone());
        }
        let pushback = HeaderValue::from(secs.saturating_mul(1_000));
        let status = status_proto(code, message.as_bytes(), secs);
        let details = HeaderValue::from_maybe_shared(Bytes::from(base64(&status))).ok();
        *last = Some((
            code,
            secs,
            message.clone(),
            pushback.clone(),
            details.clone(),
        ));
        (pushback, details)
    })
}

/// The gRPC status for a refusal's HTTP status, and its message.
fn status_of(http: StatusCode) -> (u32, &'static str) {
    match http.as_u16() {
        429 => (8, "rate limit exceeded"),
        503 => (14, "the rate limiter cannot decide now"),
        401 => (16, "credentials are required"),
        400 => (3, "the request does not name who it is from"),
        403 => (7, "refused"),
        500..=599 => (13, "the rate limiter is misconfigured"),
        _ => (2, "refused"),
    }
}

/// `grpc-message`: the status's text and the stable code, `text (code)`, percent-encoded.
fn message_of(text: &'static str, code: &str) -> HeaderValue {
    // The common refusals, without building anything.
    match code {
        "limit.exceeded" if text == "rate limit exceeded" => {
            return HeaderValue::from_static("rate limit exceeded (limit.exceeded)");
        }
        "store.unavailable" if text == "the rate limiter cannot decide now" => {
            return HeaderValue::from_static(
                "the rate limiter cannot decide now (store.unavailable)",
            );
        }
        _ => {}
    }
    let message = format!("{text} ({code})");
    HeaderValue::from_str(&percent(&message)).unwrap_or(HeaderValue::from_static(text))
}

/// `grpc-message`'s percent-encoding: every byte outside printable ASCII, and `%`.
fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// How many bytes `v` takes as a varint.
fn varint_len(v: u64) -> u64 {
    u64::from((64 - (v | 1).leading_zeros()).div_ceil(7))
}

/// A length-delimited field's tag and length (its bytes follow).
fn field_head(out: &mut Vec<u8>, field: u64, len: u64) {
    varint(out, field << 3 | 2);
    varint(out, len);
}

/// `google.rpc.Status { code, message, details: [Any(google.rpc.RetryInfo { retry_delay:
/// Duration { seconds } })] }`, encoded into one buffer (each length known in advance).
fn status_proto(code: u32, message: &[u8], secs: u64) -> Vec<u8> {
    const TYPE: &[u8] = b"type.googleapis.com/google.rpc.RetryInfo";
    let field = |len: u64| 1 + varint_len(len) + len;
    let duration = if secs > 0 { 1 + varint_len(secs) } else { 0 };
    let retry = field(duration);
    let any = field(TYPE.len() as u64) + field(retry);
    let total = 1 + varint_len(u64::from(code)) + field(message.len() as u64) + field(any);
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    varint(&mut out, 1 << 3);
    varint(&mut out, u64::from(code));
    field_head(&mut out, 2, message.len() as u64);
    out.extend_from_slice(message);
    field_head(&mut out, 3, any);
    field_head(&mut out, 1, TYPE.len() as u64);
    out.extend_from_slice(TYPE);
    field_head(&mut out, 2, retry);
    field_head(&mut out, 1, duration);
    if secs > 0 {
        varint(&mut out, 1 << 3);
        varint(&mut out, secs);
    }
    out
}

/// The `grpc-status-details-bin` value of a refusal waiting `wait` (the client's tests
/// read it back).
#[cfg(test)]
pub(crate) fn status_details_for_tests(wait: std::time::Duration) -> Vec<u8> {
    base64(&status_proto(8, b"limited", wait.as_secs()))
}

/// Standard base64 without padding (gRPC's binary headers; receivers accept both).
fn base64(bytes: &[u8]) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types_are_told_from_others() {
        let h = |v: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(CONTENT_TYPE, HeaderValue::from_static(v));
            m
        };
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC;x=1",
        ] {
            assert!(is_grpc(&h(yes)), "{yes}");
        }
        for no in [
            "application/json",
            "application/grpc-web",
            "application/grpcx",
            "text/html",
        ] {
            assert!(!is_grpc(&h(no)), "{no}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn each_refusal_maps_to_its_status_and_only_waits_carry_a_retry_info() {
        use crate::extract::Rejection;
        use std::time::Duration;
        let challenge = HeaderValue::from_static("Bearer");
        let missing = || Rejection::missing("key.missing", "x");
        for (refusal, code, retry) in [
            (
                Refusal::in_flight("n".into(), 2, Duration::from_secs(7)),
                "8",
                true,
            ),
            (Refusal::unavailable(Duration::from_secs(7)), "14", true),
            (
                Refusal::from(missing().unauthorized(challenge)),
                "16",
                false,
            ),
            (Refusal::from(missing()), "3", false),
            (Refusal::denied(), "7", false),
            (
                Refusal::from(Rejection::misconfigured("key.setup", "x")),
                "13",
                false,
            ),
        ] {
            let r = GrpcResponder.respond(&refusal);
            let status = refusal.status();
            assert_eq!(r.status(), 200, "{status}");
            assert_eq!(r.headers()["grpc-status"], code, "{status}");
            assert_eq!(r.headers()["content-type"], "application/grpc");
            assert!(r.body().is_empty());
            let msg = r.headers()["grpc-message"].to_str().unwrap();
            assert!(msg.ends_with(&format!("({})", refusal.code())), "{msg}");
            assert_eq!(
                r.headers().contains_key("grpc-status-details-bin"),
                retry,
                "{status}"
            );
            assert_eq!(r.headers().contains_key("grpc-retry-pushback-ms"), retry);
        }
        // The encoded Status: code 8, the message, one Any naming RetryInfo, 7 s.
        let bin = status_proto(8, b"m", 7);
        assert_eq!(&bin[..5], &[0x08, 8, 0x12, 1, b'm']);
        let tail = &bin[bin.len() - 4..];
        assert_eq!(
            tail,
            &[0x0a, 2, 0x08, 7],
            "RetryInfo {{ retry_delay: {{ seconds: 7 }} }}"
        );
    }

    #[test]
    fn base64_and_percent_encode_as_the_specs_say() {
        assert_eq!(base64(b""), b"");
        assert_eq!(base64(b"f"), b"Zg");
        assert_eq!(base64(b"fo"), b"Zm8");
        assert_eq!(base64(b"foo"), b"Zm9v");
        assert_eq!(base64(b"foobar"), b"Zm9vYmFy");
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out.len() as u64, varint_len(v), "{v}");
        }
        assert_eq!(percent("50% off\n"), "50%25 off%0A");
    }
}
