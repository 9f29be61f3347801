//! Client-IP resolution; see [`ClientIp`].

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::request::Parts;
use http::{Extensions, HeaderName};
use ipnet::IpNet;
use rate_limit_core::{ConfigError, ConfigErrorKind, Principal};

use super::{KeyExtractor, Rejection};

/// Where a trusted proxy reports the client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardedSource {
    /// `X-Forwarded-For`, walked from the right (the default).
    XForwardedFor,
    /// RFC 7239 `Forwarded`, walked from the right.
    Forwarded,
    /// A single-address header set and stripped by the platform (`X-Real-IP`,
    /// `CF-Connecting-IP`).
    Header(HeaderName),
    /// That header when the proxy set it, else `X-Forwarded-For` walked from the right
    /// (a proxy that sets `X-Real-IP` on some paths and appends to the list on others).
    ///
    /// **Two sources are a risk**: use this only when the proxy *always* overwrites or strips
    /// the header. Behind a proxy that passes a client's own `X-Real-IP` through (and only
    /// appends to `X-Forwarded-For`), a client names any address it likes and rotates out of
    /// every IP limit. One source per deployment is the safe default: `XForwardedFor`
    /// behind a proxy that appends, `Header` behind a platform that sets and strips it.
    HeaderThenXForwardedFor(HeaderName),
}

/// What a route keyed on the client IP without a peer address says: in the 500's body (a
/// developer trying the route sees it without a log subscriber) and, once, in the log.
const PEER_MISSING: &str = "rate limiting by client IP found no peer address in the request. \
    With axum, use rate_limit_axum::client_ip() instead of ClientIp::new() (it reads \
    ConnectInfo<SocketAddr>) and serve with into_make_service_with_connect_info::<SocketAddr>(). \
    With hyper or tower, insert the connection's SocketAddr as a request extension \
    (or set ClientIp::peer_source).";

type PeerFn = dyn Fn(&Extensions) -> Option<IpAddr> + Send + Sync;

/// The client's IP address, as a proxy chain you trust reports it.
///
///  - No trusted proxies (the default): the TCP peer, and forwarding headers are ignored —
///    any client can write them.
///  - The peer is a trusted proxy: ONE source, chosen by the operator:
///    - [`ForwardedSource::XForwardedFor`] (default): every `X-Forwarded-For` line joined in
///      order, walked from the right; the first entry that is not itself a trusted proxy is
///      the client. If every hop is trusted, the leftmost. Ports and brackets are stripped.
///    - [`ForwardedSource::Forwarded`]: the `for=` parameters of RFC 7239 `Forwarded`, the
///      same way.
///    - [`ForwardedSource::Header`]: a header a platform sets and strips from inbound
///      requests (`X-Real-IP`, `CF-Connecting-IP`). Only for such platforms: anywhere else a
///      client forges it.
///  - Garbage where the client should be (an unparsable entry, `unknown`, an obfuscated
///    identifier) stops the walk; the peer is used, and that is logged once.
///  - IPv4-mapped IPv6 counts as IPv4. IPv6 is grouped by prefix, /64 by default.
///
///  The peer comes from a `SocketAddr` (or `IpAddr`) request extension, or from a
///  [`peer_source`](ClientIp::peer_source) of your own (the axum crate reads
///  `ConnectInfo`). A route that needs the IP but has no peer is a setup error: 500,
///  logged once.
///
/// ```
/// use rate_limit_tower::extract::{ClientIp, ForwardedSource};
///
/// let behind_nginx = ClientIp::new()
///     .trusted_proxies(["10.0.0.0/8".parse().unwrap()])
///     .source(ForwardedSource::XForwardedFor);
/// let on_cloudflare = ClientIp::new()
///     .trusted_proxies(["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()])
///     .source(ForwardedSource::Header(http::HeaderName::from_static("cf-connecting-ip")));
/// # let _ = (behind_nginx, on_cloudflare);
/// ```
#[derive(Clone)]
pub struct ClientIp {
    trusted: Arc<[IpNet]>,
    source: ForwardedSource,
    v4_prefix: u8,
    v6_prefix: u8,
    peer: Arc<PeerFn>,
    warned_garbage: Arc<AtomicBool>,
    warned_peer: Arc<AtomicBool>,
}

impl fmt::Debug for ClientIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIp")
            .field("trusted", &self.trusted)
            .field("source", &self.source)
            .field("v4_prefix", &self.v4_prefix)
            .field("v6_prefix", &self.v6_prefix)
            .finish_non_exhaustive()
    }
}

impl Default for ClientIp {
    fn default() -> Self {
        Self::new()
    }
}

fn default_peer(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<SocketAddr>()
        .map(SocketAddr::ip)
        .or_else(|| ext.get::<IpAddr>().copied())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses one hop: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]:443`,
/// optionally quoted (as in `Forwarded`).
fn parse_hop(raw: &str) -> Option<IpAddr> {
    let s = raw.trim().trim_matches('"');
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

fn prefix(len: u8, max: u8) -> Result<u8, ConfigError> {
    if len > max {
        return Err(ConfigError::new(
            ConfigErrorKind::PrefixInvalid,
            if max == 32 {
                "ipv4_prefix"
            } else {
                "ipv6_prefix"
            },
            format!("a prefix length is 0 to {max}"),
        ));
    }
    Ok(len)
}

impl ClientIp {
    /// The TCP peer; no proxy trusted; IPv6 by /64.
    pub fn new() -> Self {
        Self {
            trusted: Arc::from(Vec::new()),
            source: ForwardedSource::XForwardedFor,
            v4_prefix: 32,
            v6_prefix: 64,
            peer: Arc::new(default_peer),
            warned_garbage: Arc::default(),
            warned_peer: Arc::default(),
        }
    }

    /// The reverse proxies whose forwarding headers are believed.
    #[must_use]
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.trusted = nets.into_iter().collect::<Vec<_>>().into();
        self
    }

    /// Where trusted proxies report the client (default `X-Forwarded-For`).
    #[must_use]
    pub fn source(mut self, source: ForwardedSource) -> Self {
        self.source = source;
        self
    }

    /// The IPv6 prefix one client is taken to own (default 64); `ip.prefix_invalid`
    /// above 128.
    pub fn ipv6_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.v6_prefix = prefix(len, 128)?;
        Ok(self)
    }

    /// The IPv4 prefix one client is taken to own (default 32); `ip.prefix_invalid`
    /// above 32.
    pub fn ipv4_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.v4_prefix = prefix(len, 32)?;
        Ok(self)
    }

    /// Where the TCP peer's address is found (default: a `SocketAddr` or `IpAddr` request
    /// extension).
    #[must_use]
    pub fn peer_source(
        mut self,
        peer: impl Fn(&Extensions) -> Option<IpAddr> + Send + Sync + 'static,
    ) -> Self {
        self.peer = Arc::new(peer);
        self
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The client's address (not grouped by prefix).
    pub fn resolve(&self, parts: &Parts) -> Result<IpAddr, Rejection> {
        let Some(peer) = (self.peer)(&parts.extensions).map(canonical) else {
            if !self.warned_peer.swap(true, Ordering::Relaxed) {
                tracing::error!(name: "rate_limit.peer_missing", "{PEER_MISSING}");
            }
            return Err(Rejection::misconfigured(
                "server.peer_missing",
                PEER_MISSING,
            ));
        };
        if self.trusted.is_empty() || !self.is_trusted(peer) {
            return Ok(peer);
        }
        let xff = || {
            self.walk(
                parts
                    .headers
                    .get_all("x-forwarded-for")
                    .iter()
                    .map(|v| v.to_str().ok())
                    .collect::<Option<Vec<_>>>()
                    .map(|lines| lines.into_iter().flat_map(|l| l.split(',')).collect()),
            )
        };
        let header = |name: &HeaderName| match parts.headers.get_all(name).iter().next_back() {
            None => Walk::Absent,
            Some(v) => match v.to_str().ok().and_then(parse_hop) {
                Some(ip) => Walk::Client(ip),
                None => Walk::Garbage,
            },
        };
        let found = match &self.source {
            ForwardedSource::XForwardedFor => xff(),
            ForwardedSource::Forwarded => self.walk(
                parts
                    .headers
                    .get_all(http::header::FORWARDED)
                    .iter()
                    .map(|v| v.to_str().ok())
                    .collect::<Option<Vec<_>>>()
                    .map(|lines| forwarded_for(lines)),
            ),
            ForwardedSource::Header(name) => header(name),
            ForwardedSource::HeaderThenXForwardedFor(name) => match header(name) {
                Walk::Absent => xff(),
                found => found,
            },
        };
        Ok(match found {
            Walk::Client(ip) => ip,
            Walk::Absent => peer,
            Walk::Garbage => {
                if !self.warned_garbage.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        name: "rate_limit.forwarded_invalid",
                        "a trusted proxy sent an unusable client address; using the proxy's \
                         own address for such requests"
                    );
                }
                peer
            }
        })
    }

    /// Walks hops from the right. `None`: a header line was not text (garbage).
    fn walk(&self, hops: Option<Vec<&str>>) -> Walk {
        let Some(hops) = hops else {
            return Walk::Garbage;
        };
        if hops.is_empty() {
            return Walk::Absent;
        }
        let mut leftmost = None;
        for raw in hops.iter().rev() {
            match parse_hop(raw) {
                None => return Walk::Garbage,
                Some(ip) if self.is_trusted(ip) => leftmost = Some(ip),
                Some(ip) => return Walk::Client(ip),
            }
        }
        leftmost.map_or(Walk::Absent, Walk::Client)
    }
}

enum Walk {
    Client(IpAddr),
    Absent,
    Garbage,
}

/// The `for=` values of `Forwarded` lines, in order. An element without `for=` yields an
/// empty entry (garbage: it stops the walk).
fn forwarded_for(lines: Vec<&str>) -> Vec<&str> {
    lines
        .into_iter()
        .flat_map(|l| l.split(','))
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
                .map_or("", |(_, v)| v.trim())
        })
        .collect()
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        let ip = self.resolve(parts)?;
        Ok(Principal::ip_with_prefix(
            ip,
            self.v4_prefix,
            self.v6_prefix,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(peer: &str, headers: &[(&str, &[u8])]) -> Parts {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, http::HeaderValue::from_bytes(v).unwrap());
        }
        let (mut p, ()) = b.body(()).unwrap().into_parts();
        p.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        p
    }

    fn proxy() -> ClientIp {
        ClientIp::new()
            .trusted_proxies(["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()])
    }

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
            assert_eq!(parse_hop(raw), Some(ip(want)), "{raw}");
        }
        for garbage in ["", "unknown", "_hidden", "1.2.3", "1.2.3.4.5", "[::1", "x"] {
            assert_eq!(parse_hop(garbage), None, "{garbage}");
        }
    }

    /// (peer, headers, expected client)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a [u8])], &'a str);

    #[test]
    fn x_forwarded_for_table() {
        let c = proxy();
        let cases: &[Case<'_>] = &[
            // Untrusted peer: headers ignored.
            (
                "203.0.113.9:1",
                &[("x-forwarded-for", b"1.1.1.1")],
                "203.0.113.9",
            ),
            // Trusted peer: the rightmost untrusted hop.
            (
                "10.0.0.2:1",
                &[("x-forwarded-for", b"6.6.6.6, 1.1.1.1, 10.0.0.3")],
                "1.1.1.1",
            ),
            // Several lines are joined in order.
            (
                "10.0.0.2:1",
                &[
                    ("x-forwarded-for", b"6.6.6.6"),
                    ("x-forwarded-for", b"2.2.2.2:80, 10.1.1.1"),
                ],
                "2.2.2.2",
            ),
            // Every hop trusted: the leftmost.
            (
                "10.0.0.2:1",
                &[("x-forwarded-for", b"10.9.9.9, 10.0.0.3")],
                "10.9.9.9",
            ),
            // Garbage where the client should be: the peer.
            (
                "10.0.0.2:1",
                &[("x-forwarded-for", b"1.1.1.1, garbage, 10.0.0.3")],
                "10.0.0.2",
            ),
            (
                "10.0.0.2:1",
                &[("x-forwarded-for", &[0xff, 0xfe])],
                "10.0.0.2",
            ),
            // Absent header: the peer.
            ("10.0.0.2:1", &[], "10.0.0.2"),
            // IPv6 with brackets and a port.
            (
                "[fd00::1]:9",
                &[("x-forwarded-for", b"[2001:db8::7]:443")],
                "2001:db8::7",
            ),
        ];
        for (peer, headers, want) in cases {
            assert_eq!(
                c.resolve(&parts(peer, headers)).unwrap(),
                ip(want),
                "{peer} {headers:?}"
            );
        }
    }

    #[test]
    fn forwarded_table() {
        let c = proxy().source(ForwardedSource::Forwarded);
        let p = parts(
            "10.0.0.2:1",
            &[("forwarded", b"for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.0.0.9;by=10.0.0.2")],
        );
        assert_eq!(c.resolve(&p).unwrap(), ip("2001:db8:cafe::17"));
        let p = parts("10.0.0.2:1", &[("forwarded", b"for=1.1.1.1, for=unknown")]);
        assert_eq!(c.resolve(&p).unwrap(), ip("10.0.0.2"));
        // X-Forwarded-For is not read when Forwarded is the source.
        let p = parts("10.0.0.2:1", &[("x-forwarded-for", b"1.1.1.1")]);
        assert_eq!(c.resolve(&p).unwrap(), ip("10.0.0.2"));
    }

    #[test]
    fn platform_header() {
        let c = proxy().source(ForwardedSource::Header(HeaderName::from_static(
            "x-real-ip",
        )));
        let p = parts(
            "10.0.0.2:1",
            &[
                ("x-real-ip", b" 198.51.100.4 "),
                ("x-forwarded-for", b"1.1.1.1"),
            ],
        );
        assert_eq!(c.resolve(&p).unwrap(), ip("198.51.100.4"));
        let p = parts("10.0.0.2:1", &[("x-real-ip", b"nonsense")]);
        assert_eq!(c.resolve(&p).unwrap(), ip("10.0.0.2"));
        // From an untrusted peer the platform header is ignored too.
        let p = parts("198.51.100.200:1", &[("x-real-ip", b"9.9.9.9")]);
        assert_eq!(c.resolve(&p).unwrap(), ip("198.51.100.200"));
    }

    #[test]
    fn platform_header_then_forwarded_for() {
        let c = proxy().source(ForwardedSource::HeaderThenXForwardedFor(
            HeaderName::from_static("x-real-ip"),
        ));
        let p = parts(
            "10.0.0.2:1",
            &[
                ("x-real-ip", b"198.51.100.4"),
                ("x-forwarded-for", b"1.1.1.1"),
            ],
        );
        assert_eq!(c.resolve(&p).unwrap(), ip("198.51.100.4"));
        let p = parts(
            "10.0.0.2:1",
            &[("x-forwarded-for", b"6.6.6.6, 1.1.1.1, 10.0.0.3")],
        );
        assert_eq!(c.resolve(&p).unwrap(), ip("1.1.1.1"));
        let p = parts("10.0.0.2:1", &[]);
        assert_eq!(c.resolve(&p).unwrap(), ip("10.0.0.2"));
    }

    #[test]
    fn missing_peer_is_a_setup_error() {
        let (p, ()) = http::Request::new(()).into_parts();
        let r = ClientIp::new().resolve(&p).unwrap_err();
        assert_eq!(
            (r.status().as_u16(), r.code()),
            (500, "server.peer_missing")
        );
    }
}
