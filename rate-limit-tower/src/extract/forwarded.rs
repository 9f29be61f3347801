//! Forwarding headers read as bytes, walked from the right.
//!
//! A proxy appends to the line the client sent, so every byte to the left of the proxy's own
//! entry is the client's to choose: a non-ASCII byte, an unterminated quote, a stray `;`.
//! Hops are therefore split and parsed from the raw bytes, one at a time from the right,
//! and the walk stops at the first hop that is not a trusted proxy: whatever stands to its
//! left is never read. Splitting is deliberately not quote-aware: a quote the client opens
//! cannot swallow the entries a proxy appends after it.

use std::net::{IpAddr, SocketAddr};

use http::HeaderValue;
use http::header::GetAll;

/// What a forwarding header says about the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    /// The client's address.
    Client(IpAddr),
    /// No such header: the peer is the client (a proxy's own request, a health check).
    Absent,
    /// The header is there, but where the client should be stands no usable address.
    Garbage,
}

/// IPv4-mapped IPv6 counts as IPv4.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses one hop: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]:443`,
/// optionally quoted (as in `Forwarded`), with surrounding white space. Anything that is not
/// ASCII is no address.
pub(super) fn parse_hop(raw: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(raw.trim_ascii()).ok()?;
    let s = s.strip_prefix('"').unwrap_or(s);
    let s = s.strip_suffix('"').unwrap_or(s);
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(canonical(sa.ip()));
    }
    // "[v6]" without a port.
    s.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.parse::<IpAddr>().ok())
        .map(canonical)
}

/// The list elements of every line of a header, from the last line's last element back to
/// the first line's first. Empty elements (`a, , b`; RFC 9110 §5.6.1 says to ignore them)
/// are skipped.
fn elements_from_the_right<'a>(lines: GetAll<'a, HeaderValue>) -> impl Iterator<Item = &'a [u8]> {
    lines
        .into_iter()
        .rev()
        .flat_map(|line| line.as_bytes().rsplit(|b| *b == b','))
        .filter(|e| !e.trim_ascii().is_empty())
}

/// `X-Forwarded-For`: each element is a hop.
pub(super) fn x_forwarded_for(
    lines: GetAll<'_, HeaderValue>,
    trusted: impl Fn(IpAddr) -> bool,
) -> Walk {
    walk(lines, trusted, Some)
}

/// RFC 7239 `Forwarded`: each element's `for=` parameter is a hop; an element without one
/// is no address.
pub(super) fn forwarded(lines: GetAll<'_, HeaderValue>, trusted: impl Fn(IpAddr) -> bool) -> Walk {
    walk(lines, trusted, for_parameter)
}

/// A single-address header a platform sets (`X-Real-IP`): its last line.
pub(super) fn single(lines: GetAll<'_, HeaderValue>) -> Walk {
    match lines.into_iter().next_back() {
        None => Walk::Absent,
        Some(v) => parse_hop(v.as_bytes()).map_or(Walk::Garbage, Walk::Client),
    }
}

/// The value of `for=` in one `Forwarded` element.
fn for_parameter(element: &[u8]) -> Option<&[u8]> {
    element.split(|b| *b == b';').find_map(|pair| {
        let eq = pair.iter().position(|b| *b == b'=')?;
        let (key, value) = (&pair[..eq], &pair[eq + 1..]);
        key.trim_ascii()
            .eq_ignore_ascii_case(b"for")
            .then_some(value)
    })
}

/// Walks hops from the right: the first that is not a trusted proxy is the client; if
/// every hop is trusted, the leftmost; a header with no element at all, or an unusable
/// element reached before the client, is garbage.
fn walk<'a>(
    lines: GetAll<'a, HeaderValue>,
    trusted: impl Fn(IpAddr) -> bool,
    hop: impl Fn(&'a [u8]) -> Option<&'a [u8]>,
) -> Walk {
    let present = lines.iter().next().is_some();
    let mut leftmost = None;
    for element in elements_from_the_right(lines) {
        match hop(element).and_then(parse_hop) {
            None => return Walk::Garbage,
            Some(ip) if trusted(ip) => leftmost = Some(ip),
            Some(ip) => return Walk::Client(ip),
        }
    }
    match leftmost {
        Some(ip) => Walk::Client(ip),
        None if present => Walk::Garbage,
        None => Walk::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hops_parse_with_ports_brackets_and_quotes() {
        for (raw, want) in [
            ("1.2.3.4", "1.2.3.4"),
            (" 1.2.3.4:8080 ", "1.2.3.4"),
            ("2001:db8::1", "2001:db8::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("\"[2001:db8::1]:443\"", "2001:db8::1"),
            ("::ffff:1.2.3.4", "1.2.3.4"),
        ] {
            assert_eq!(parse_hop(raw.as_bytes()), Some(ip(want)), "{raw}");
        }
        for garbage in ["", "unknown", "_hidden", "1.2.3", "1.2.3.4.5", "[::1", "x"] {
            assert_eq!(parse_hop(garbage.as_bytes()), None, "{garbage}");
        }
        for bytes in [&b"1.2.3.4\x80"[..], b"\xff\xfe", b"\x801.2.3.4"] {
            assert_eq!(parse_hop(bytes), None, "{bytes:?}");
        }
    }

    #[test]
    fn for_is_found_in_any_case_among_other_parameters() {
        assert_eq!(
            for_parameter(b"proto=https; For=1.2.3.4;by=x"),
            Some(&b"1.2.3.4"[..])
        );
        assert_eq!(for_parameter(b"proto=https"), None);
        assert_eq!(for_parameter(b"for"), None);
    }
}
