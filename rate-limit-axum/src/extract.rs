//! Key extractors that speak axum.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, MatchedPath};
use http::Extensions;
use http::request::Parts;
use ratekeeper_core::{Principal, PrincipalKind};
use ratekeeper_tower::extract::{ClientIp, KeyExtractor, Rejection};

/// The TCP peer from axum's `ConnectInfo<SocketAddr>` (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`), or a `SocketAddr` extension.
pub fn connect_info_peer(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .or_else(|| ext.get::<SocketAddr>().map(SocketAddr::ip))
}

/// [`ClientIp`] reading the peer from `ConnectInfo`. Add trusted proxies as usual.
pub fn client_ip() -> ClientIp {
    ClientIp::new().peer_source(connect_info_peer)
}

/// A path parameter by name (`{game}` in `/api/games/{game}/poll`) as the principal.
///
/// It reads the route template from axum's `MatchedPath`, which exists once the router has
/// matched: use it in a `route_layer` (of a `Router` or a `MethodRouter`), not in `Router::layer`
/// (that would be a setup error: 500).
#[derive(Debug, Clone)]
pub struct PathParam {
    name: String,
    kind: PrincipalKind,
}

impl PathParam {
    /// The parameter `name` (without braces), counted as a principal of `kind`.
    pub fn new(name: &str, kind: PrincipalKind) -> Self {
        Self {
            name: name.trim_matches(|c| c == '{' || c == '}').to_owned(),
            kind,
        }
    }

    /// The parameter's raw (percent-decoded) value in this request.
    pub fn value(&self, parts: &Parts) -> Result<Vec<u8>, Rejection> {
        let Some(matched) = parts.extensions.get::<MatchedPath>() else {
            return Err(Rejection::misconfigured(
                "server.no_matched_path",
                "a path-parameter limit must be applied with route_layer",
            ));
        };
        let template: Vec<&str> = matched.as_str().split('/').collect();
        let path: Vec<&str> = parts.uri.path().split('/').collect();
        let plain = format!("{{{}}}", self.name);
        let wild = format!("{{*{}}}", self.name);
        for (i, seg) in template.iter().enumerate() {
            if *seg == plain {
                if let Some(v) = path.get(i) {
                    return Ok(percent_decode(v));
                }
            } else if *seg == wild {
                return Ok(percent_decode(&path.get(i..).unwrap_or_default().join("/")));
            }
        }
        Err(Rejection::misconfigured(
            "server.unknown_path_param",
            "the route has no such path parameter",
        ))
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

impl KeyExtractor for PathParam {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        let v = self.value(parts)?;
        if v.is_empty() {
            return Err(Rejection::invalid(
                "principal.empty",
                format!("the {} is empty", self.name),
            ));
        }
        Ok(Principal::new(self.kind.clone(), v))
    }
}

/// The matched route template (`/api/games/{game}/poll`) as the principal: one budget per
/// route, whoever calls it. Use it in a `route_layer`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteTemplate;

impl KeyExtractor for RouteTemplate {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        let matched = parts.extensions.get::<MatchedPath>().ok_or_else(|| {
            Rejection::misconfigured(
                "server.no_matched_path",
                "a route-template limit must be applied with route_layer",
            )
        })?;
        let kind = PrincipalKind::custom("route").unwrap_or(PrincipalKind::Global);
        Ok(Principal::new(kind, matched.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b%2Fc"), b"a b/c");
        assert_eq!(percent_decode("100%"), b"100%");
        assert_eq!(percent_decode("%zz"), b"%zz");
    }
}
