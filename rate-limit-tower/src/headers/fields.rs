//! Writing header fields: the structured lists of the IETF draft, integers without
//! allocation, `Server-Timing`, `Retry-After` and the CORS exposure.

use super::*;

const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The `Server-Timing` metric of a held request (W3C Server Timing: shown by browsers'
/// developer tools), once: an outer layer rewriting the headers does not repeat it.
pub(super) fn write_held(headers: &mut HeaderMap, held: std::time::Duration) {
    const METRIC: &str = "rate-limit-hold;dur=";
    let seen = headers
        .get_all(SERVER_TIMING)
        .iter()
        .any(|v| v.as_bytes().starts_with(METRIC.as_bytes()));
    if seen {
        return;
    }
    let ms = itoa::Buffer::new().format(held.as_millis()).to_owned();
    if let Ok(v) = HeaderValue::from_str(&format!("{METRIC}{ms}")) {
        headers.append(SERVER_TIMING, v);
    }
}

/// The largest structured-field integer (RFC 9651 §3.3.1); larger counts are clamped.
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

pub(super) fn put_int(buf: &mut BytesMut, n: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(n.min(SF_INTEGER_MAX)).as_bytes());
}

/// Moves what `buf` holds into `name`'s value; nothing (and no stale value) if it is empty.
pub(super) fn insert(headers: &mut HeaderMap, name: HeaderName, buf: &mut BytesMut) {
    let bytes = buf.split().freeze();
    match (bytes.is_empty(), HeaderValue::from_maybe_shared(bytes)) {
        (false, Ok(v)) => {
            headers.insert(name, v);
        }
        _ => {
            headers.remove(name);
        }
    }
}

/// A structured-field list of the limits' names (sf-strings), each with two integer
/// parameters: `"name";q=100;w=60, ...`. Limit names are checked when a limit is built
/// (`A-Z a-z 0-9 . _ -`), so they need no escaping; a name that would (`"`, `\\`, or a byte
/// outside printable ASCII) is left out rather than rendered into an invalid field.
pub(super) fn put_list(
    buf: &mut BytesMut,
    limits: &[LimitStatus],
    keys: [&[u8]; 2],
    params: impl Fn(&LimitStatus) -> [u64; 2],
) {
    let mut first = true;
    for l in limits {
        if !l
            .name
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            continue;
        }
        if !first {
            buf.extend_from_slice(b", ");
        }
        first = false;
        buf.extend_from_slice(b"\"");
        buf.extend_from_slice(l.name.as_bytes());
        buf.extend_from_slice(b"\"");
        for (key, v) in keys.into_iter().zip(params(l)) {
            if l.concurrent && key == b";w=" {
                // An in-flight limit has no window: its quota unit says what it counts.
                buf.extend_from_slice(b";qu=\"concurrent-requests\"");
                continue;
            }
            buf.extend_from_slice(key);
            put_int(buf, v);
        }
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after(secs: u64) -> HeaderValue {
    HeaderValue::from(secs.max(1))
}

/// For a request with `Origin` and no CORS layer: lists our headers in
/// `Access-Control-Expose-Headers` (adding to any list already there) and adds
/// `Vary: Origin`.
pub(crate) fn expose(headers: &mut HeaderMap) {
    let existing: Vec<String> = headers
        .get_all(ACCESS_CONTROL_EXPOSE_HEADERS)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if existing.iter().any(|s| s == "*") {
        return;
    }
    let mut names = existing.clone();
    for h in &EXPOSED_HEADERS {
        if !names.iter().any(|n| n == h.as_str()) {
            names.push(h.as_str().to_owned());
        }
    }
    if names.len() != existing.len()
        && let Ok(v) = HeaderValue::try_from(names.join(", "))
    {
        headers.insert(ACCESS_CONTROL_EXPOSE_HEADERS, v);
    }
    let varies = headers
        .get_all(VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|s| s.trim().eq_ignore_ascii_case("origin") || s.trim() == "*");
    if !varies {
        headers.append(VARY, HeaderValue::from_static("origin"));
    }
}
