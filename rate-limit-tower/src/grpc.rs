//! gRPC answers: a request whose `content-type` is `application/grpc` (or `+proto`, …) is
//! answered as gRPC, never with an HTML redirect or a JSON body. Every answer the layer
//! makes itself becomes a trailers-only response: HTTP 200, `content-type:
//! application/grpc`, `grpc-status` and `grpc-message` in the headers, the rate-limit
//! headers kept as response metadata, and for a refusal or an unavailable store a
//! `google.rpc.RetryInfo` with the wait in `grpc-status-details-bin` (a `google.rpc.Status`,
//! base64), and the same wait in `grpc-retry-pushback-ms` (what gRPC's retry policy reads:
//! its clients wait that long before a retry, where they never read `RetryInfo`). An
//! admitted call's own response gets the rate-limit headers as its metadata.
//!
//! | HTTP answer | gRPC status |
//! |---|---|
//! | 429 (limited, banned) | 8 `RESOURCE_EXHAUSTED`, with `RetryInfo` |
//! | 503 (the store failed under a closed policy) | 14 `UNAVAILABLE`, with `RetryInfo` |
//! | 401 (no credentials for the principal) | 16 `UNAUTHENTICATED` |
//! | 400 (the principal cannot be named) | 3 `INVALID_ARGUMENT` |
//! | 403 (a deny list, a ban answered 403) | 7 `PERMISSION_DENIED` |
//! | 500 (an operator's error) | 13 `INTERNAL` |

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

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

/// The gRPC status for one of the layer's HTTP answers, and its message.
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

/// The stable code in one of the layer's JSON bodies (`"code":"…"`), if any.
fn code_in(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find("\"code\":\"")? + 8..];
    let code = &rest[..rest.find('"')?];
    code.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        .then_some(code)
}

/// `response` (one the layer made: a refusal, a rejection, an outage) as gRPC.
pub(crate) fn answer(response: Response<Bytes>) -> Response<Bytes> {
    let (mut parts, body) = response.into_parts();
    let (code, text) = status_of(parts.status);
    let message = match code_in(&body) {
        Some(c) => format!("{text} ({c})"),
        None => text.to_owned(),
    };
    let wait = parts
        .headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|_| matches!(code, 8 | 14));
    let h = &mut parts.headers;
    h.remove(CONTENT_LENGTH);
    h.remove(http::header::LOCATION);
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    h.insert("grpc-status", HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(&percent(&message)) {
        h.insert("grpc-message", v);
    }
    if let Some(secs) = wait {
        // gRPC's own retry policy waits for this header (it never reads `RetryInfo`).
        h.insert(
            "grpc-retry-pushback-ms",
            HeaderValue::from(secs.saturating_mul(1_000)),
        );
        let status = status_proto(code, &message, secs);
        if let Ok(v) = HeaderValue::from_str(&base64(&status)) {
            h.insert("grpc-status-details-bin", v);
        }
    }
    parts.status = StatusCode::OK;
    Response::from_parts(parts, Bytes::new())
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

/// A length-delimited field.
fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `google.rpc.Status { code, message, details: [Any(google.rpc.RetryInfo { retry_delay:
/// Duration { seconds } })] }`, encoded.
fn status_proto(code: u32, message: &str, secs: u64) -> Vec<u8> {
    let mut duration = Vec::new();
    if secs > 0 {
        varint(&mut duration, 1 << 3);
        varint(&mut duration, secs);
    }
    let mut retry = Vec::new();
    bytes_field(&mut retry, 1, &duration);
    let mut any = Vec::new();
    bytes_field(&mut any, 1, b"type.googleapis.com/google.rpc.RetryInfo");
    bytes_field(&mut any, 2, &retry);
    let mut status = Vec::new();
    varint(&mut status, 1 << 3);
    varint(&mut status, u64::from(code));
    bytes_field(&mut status, 2, message.as_bytes());
    bytes_field(&mut status, 3, &any);
    status
}

/// Standard base64 without padding (gRPC's binary headers; receivers accept both).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(A[(n >> (18 - 6 * i) & 63) as usize]));
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
    fn each_answer_maps_to_its_status_and_only_waits_carry_a_retry_info() {
        let http = |status: u16, body: &'static str, retry: Option<&'static str>| {
            let mut b = Response::builder().status(status);
            if let Some(r) = retry {
                b = b.header(RETRY_AFTER, r);
            }
            answer(b.body(Bytes::from_static(body.as_bytes())).unwrap())
        };
        for (status, code, retry) in [
            (429, "8", true),
            (503, "14", true),
            (401, "16", false),
            (400, "3", false),
            (403, "7", false),
            (500, "13", false),
        ] {
            let r = http(status, r#"{"error":"x","code":"some.code"}"#, Some("7"));
            assert_eq!(r.status(), 200, "{status}");
            assert_eq!(r.headers()["grpc-status"], code, "{status}");
            assert_eq!(r.headers()["content-type"], "application/grpc");
            assert!(r.body().is_empty());
            let msg = r.headers()["grpc-message"].to_str().unwrap();
            assert!(msg.ends_with("(some.code)"), "{msg}");
            assert_eq!(
                r.headers().contains_key("grpc-status-details-bin"),
                retry,
                "{status}"
            );
        }
        // The encoded Status: code 8, the message, one Any naming RetryInfo, 7 s.
        let bin = status_proto(8, "m", 7);
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
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg");
        assert_eq!(base64(b"fo"), "Zm8");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(percent("50% off\n"), "50%25 off%0A");
    }
}
