//! Client-IP resolution; see [`ClientIp`].

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::request::Parts;
use http::{Extensions, HeaderName};
use ipnet::IpNet;
use ratekeeper_core::net::IpBlock;
use ratekeeper_core::{ConfigError, ConfigErrorKind, Principal};

use super::forwarded::{self, Walk, canonical};
use super::{KeyExtractor, Rejection};

/// Where a trusted proxy reports the client.
///
/// You need it behind a proxy: it tells `ClientIp` which header your trusted proxies write
/// the client's address into.
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
    With axum, serve with into_make_service_with_connect_info::<SocketAddr>() and use \
    ratekeeper_axum::client_ip() (or ClientIp::new() with ratekeeper-tower's feature `axum`: \
    both read ConnectInfo<SocketAddr>). With hyper or tower, insert the connection's \
    SocketAddr as a request extension (or set ClientIp::peer_source).";

type PeerFn = dyn Fn(&Extensions) -> Option<IpAddr> + Send + Sync;

/// The client's IP address, as a proxy chain you trust reports it.
///
///  - No trusted proxies (the default): the TCP peer, and forwarding headers are ignored —
///    any client can write them.
///  - The peer is a trusted proxy: ONE source, chosen by the operator:
///    - [`ForwardedSource::XForwardedFor`] (default): every `X-Forwarded-For` line joined in
///      order, walked from the right; the first entry that is not itself a trusted proxy is
///      the client. If every hop is trusted, the leftmost. Ports and brackets are stripped;
///      empty elements are skipped. Hops are read from the raw bytes one at a time, so the
///      bytes left of the client's entry (the client's own to write: a proxy appends to its
///      line) are never read at all.
///    - [`ForwardedSource::Forwarded`]: the `for=` parameters of RFC 7239 `Forwarded`, the
///      same way.
///    - [`ForwardedSource::Header`]: a header a platform sets and strips from inbound
///      requests (`X-Real-IP`, `CF-Connecting-IP`). Only for such platforms: anywhere else a
///      client forges it.
///  - A forwarding header from a trusted peer that is present but names no usable client —
///    an unparsable entry where the client should be (`unknown`, an obfuscated identifier,
///    a byte outside ASCII), or no entry at all — is a **400 `ip.forwarded_invalid`**,
///    logged once. Never the peer: the peer is the trusted proxy, and a proxy's address is
///    often on an allow list or shared by every client behind it. An *absent* header still
///    means the peer (the proxy's own request, a health check).
///  - IPv4-mapped IPv6 counts as IPv4. IPv6 is grouped by prefix, /64 by default.
///
///  The peer comes from a `SocketAddr` (or `IpAddr`) request extension, from axum's
///  `ConnectInfo<SocketAddr>` (feature `axum`, which ratekeeper-axum turns on: serve with
///  `into_make_service_with_connect_info::<SocketAddr>()`), or from a
///  [`peer_source`](ClientIp::peer_source) of your own. A route that needs the IP but has
///  no peer is a setup error: 500, logged once.
///
/// ```
/// use ratekeeper_tower::extract::{ClientIp, ForwardedSource};
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
    trusted: Arc<[IpBlock]>,
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
        .or_else(|| connect_info(ext))
}

/// axum's `ConnectInfo<SocketAddr>` (feature `axum`, which ratekeeper-axum turns on).
#[cfg(feature = "axum")]
fn connect_info(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

#[cfg(not(feature = "axum"))]
fn connect_info(_: &Extensions) -> Option<IpAddr> {
    None
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

/// The default peer function, one for every `ClientIp` (so two built alike are the same
/// extractor: [`KeyExtractor::same_key_as`]).
static DEFAULT_PEER: std::sync::LazyLock<Arc<PeerFn>> =
    std::sync::LazyLock::new(|| Arc::new(default_peer));

impl ClientIp {
    /// The TCP peer; no proxy trusted; IPv6 by /64.
    pub fn new() -> Self {
        Self {
            trusted: Arc::from(Vec::new()),
            source: ForwardedSource::XForwardedFor,
            v4_prefix: 32,
            v6_prefix: 64,
            peer: Arc::clone(&DEFAULT_PEER),
            warned_garbage: Arc::default(),
            warned_peer: Arc::default(),
        }
    }

    /// The reverse proxies whose forwarding headers are believed, as networks
    /// ([`IpNet`](crate::extract::IpNet), re-exported: `"10.0.0.0/8".parse()?`). See
    /// [`trusted_proxies_parse`](Self::trusted_proxies_parse) for a list of strings.
    #[must_use]
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.trusted = nets.into_iter().map(block_of).collect::<Vec<_>>().into();
        self
    }

    /// The reverse proxies whose forwarding headers are believed, as written in a
    /// configuration file: CIDRs (`10.0.0.0/8`, `2001:db8::/32`) and single addresses
    /// (`192.0.2.7`, `::1`), as access lists read them. `ip.proxy_invalid`, naming the
    /// entry's position, for anything else.
    ///
    /// ```
    /// use ratekeeper_tower::extract::ClientIp;
    ///
    /// let ip = ClientIp::new().trusted_proxies_parse(&["10.0.0.0/8", "::1"])?;
    /// # let _ = ip;
    /// let err = ClientIp::new().trusted_proxies_parse(&["10.0.0.0/33"]).unwrap_err();
    /// assert_eq!(err.code(), "ip.proxy_invalid");
    /// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
    /// ```
    pub fn trusted_proxies_parse<S: AsRef<str>>(
        mut self,
        entries: &[S],
    ) -> Result<Self, ConfigError> {
        let blocks = entries.iter().enumerate().map(|(i, e)| {
            e.as_ref().trim().parse::<IpBlock>().map_err(|e| {
                ConfigError::new(
                    ConfigErrorKind::ProxyInvalid,
                    format!("trusted_proxies[{i}]"),
                    e.to_string(),
                )
            })
        });
        self.trusted = blocks.collect::<Result<Vec<_>, _>>()?.into();
        Ok(self)
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
        self.trusted.iter().any(|net| net.contains(ip))
    }

    /// The client's address (not grouped by prefix).
    pub fn resolve(&self, parts: &Parts) -> Result<IpAddr, Rejection> {
        let Some(peer) = (self.peer)(&parts.extensions).map(canonical) else {
            if !self.warned_peer.swap(true, Ordering::Relaxed) {
                tracing::error!(name: "rate_limit.peer_missing", target: "rate_limit.peer_missing", "{PEER_MISSING}");
            }
            return Err(Rejection::misconfigured(
                "server.peer_missing",
                PEER_MISSING,
            ));
        };
        if self.trusted.is_empty() || !self.is_trusted(peer) {
            return Ok(peer);
        }
        let trusted = |ip| self.is_trusted(ip);
        let xff = || forwarded::x_forwarded_for(parts.headers.get_all("x-forwarded-for"), trusted);
        let found = match &self.source {
            ForwardedSource::XForwardedFor => xff(),
            ForwardedSource::Forwarded => {
                forwarded::forwarded(parts.headers.get_all(http::header::FORWARDED), trusted)
            }
            ForwardedSource::Header(name) => forwarded::single(parts.headers.get_all(name)),
            ForwardedSource::HeaderThenXForwardedFor(name) => {
                match forwarded::single(parts.headers.get_all(name)) {
                    Walk::Absent => xff(),
                    found => found,
                }
            }
        };
        match found {
            Walk::Client(ip) => Ok(ip),
            Walk::Absent => Ok(peer),
            Walk::Garbage => {
                if !self.warned_garbage.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        name: "rate_limit.forwarded_invalid",
                        target: "rate_limit.forwarded_invalid",
                        "a trusted proxy forwarded a request whose forwarding header names no \
                         usable client address; such requests are answered 400 \
                         ip.forwarded_invalid"
                    );
                }
                Err(Rejection::invalid(
                    "ip.forwarded_invalid",
                    "the forwarding header names no usable client address",
                ))
            }
        }
    }
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

    /// The same settings, and the same peer function (a clone's: a function has no
    /// equality of its own).
    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Self>()
            .is_some_and(|o| {
                self.trusted == o.trusted
                    && self.source == o.source
                    && (self.v4_prefix, self.v6_prefix) == (o.v4_prefix, o.v6_prefix)
                    && Arc::ptr_eq(&self.peer, &o.peer)
            })
    }
}

/// A network as the range of addresses it holds.
fn block_of(net: IpNet) -> IpBlock {
    match net {
        IpNet::V4(n) => IpBlock::V4 {
            first: u32::from(n.network()),
            last: u32::from(n.broadcast()),
        },
        IpNet::V6(n) => IpBlock::V6 {
            first: u128::from(n.network()),
            last: u128::from(n.broadcast()),
        },
    }
}

#[cfg(test)]
#[path = "ip_tests.rs"]
mod tests;
