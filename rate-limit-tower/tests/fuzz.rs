//! Property-based fuzzing of client-IP resolution, with an oracle: hops are generated as a
//! model (addresses trusted or not, IPv4, IPv6, IPv4-mapped, with and without ports and
//! brackets, padding, garbage), rendered as `X-Forwarded-For` lines or RFC 7239
//! `Forwarded` elements, and the extractor's answer must be the model's: the rightmost hop
//! that is not a trusted proxy; all trusted, the leftmost; garbage where the walk reaches
//! it, the peer. CI runs proptest's default case count; `scripts/fuzz.sh` runs millions.
//!
//! A test binary of its own: garbage hops log `rate_limit.forwarded_invalid`, which the
//! layer tests' log assertions would otherwise count.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::request::Parts;
use proptest::prelude::*;
use rate_limit_core::Principal;
use rate_limit_tower::extract::{ClientIp, ForwardedSource, KeyExtractor};

#[derive(Debug, Clone)]
enum Hop {
    V4(Ipv4Addr, Option<u16>),
    /// Bracketed (then maybe a port) or bare.
    V6(Ipv6Addr, bool, Option<u16>),
    /// `::ffff:a.b.c.d`: counts as the IPv4 address.
    Mapped(Ipv4Addr),
    Garbage(&'static str),
}

impl Hop {
    fn ip(&self) -> Option<IpAddr> {
        match self {
            Self::V4(ip, _) | Self::Mapped(ip) => Some(IpAddr::V4(*ip)),
            Self::V6(ip, ..) => Some(IpAddr::V6(*ip)),
            Self::Garbage(_) => None,
        }
    }

    fn render(&self) -> String {
        match self {
            Self::V4(ip, None) => ip.to_string(),
            Self::V4(ip, Some(p)) => format!("{ip}:{p}"),
            Self::V6(ip, false, _) => ip.to_string(),
            Self::V6(ip, true, None) => format!("[{ip}]"),
            Self::V6(ip, true, Some(p)) => format!("[{ip}]:{p}"),
            Self::Mapped(ip) => format!("::ffff:{ip}"),
            Self::Garbage(g) => (*g).to_owned(),
        }
    }
}

fn trusted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 10,
        IpAddr::V6(v6) => v6.segments()[0] >> 8 == 0xfd,
    }
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    // Half in the trusted 10/8, half public.
    prop_oneof![
        any::<[u8; 3]>().prop_map(|[a, b, c]| Ipv4Addr::new(10, a, b, c)),
        // Mapped out of 10/8 rather than filtered: filters give up at millions of cases.
        any::<[u8; 4]>().prop_map(|mut o| {
            if o[0] == 10 {
                o[0] = 11;
            }
            Ipv4Addr::from(o)
        }),
    ]
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    prop_oneof![
        any::<[u16; 7]>().prop_map(|s| {
            Ipv6Addr::new(
                0xfd00 | (s[0] & 0xff),
                s[1],
                s[2],
                s[3],
                s[4],
                s[5],
                s[6],
                1,
            )
        }),
        // Public: neither trusted (fd00::/8) nor IPv4-mapped or compatible.
        any::<[u16; 8]>().prop_map(|mut s| {
            if s[0] >> 8 == 0xfd || s[0] == 0 || s[0] == 0xffff {
                s[0] = 0x2001;
            }
            Ipv6Addr::from(s)
        }),
    ]
}

fn hop() -> impl Strategy<Value = Hop> {
    prop_oneof![
        4 => (v4(), proptest::option::of(1u16..)).prop_map(|(ip, p)| Hop::V4(ip, p)),
        3 => (v6(), any::<bool>(), proptest::option::of(1u16..))
            .prop_map(|(ip, b, p)| Hop::V6(ip, b, if b { p } else { None })),
        1 => v4().prop_map(Hop::Mapped),
        1 => prop::sample::select(vec![
            "unknown", "_hidden", "", "1.2.3", "999.1.1.1", "[::1", "::1]", "a.b.c.d",
            "1.2.3.4:", "[2001:db8::1]:x", "2001:db8::1:443:",
        ])
        .prop_map(Hop::Garbage),
    ]
}

/// The model's answer: `None` is the peer.
fn oracle(hops: &[Hop]) -> Option<IpAddr> {
    let mut leftmost = None;
    for h in hops.iter().rev() {
        match h.ip() {
            None => return None,
            Some(ip) if trusted(ip) => leftmost = Some(ip),
            Some(ip) => return Some(ip),
        }
    }
    leftmost
}

const PEER: &str = "10.0.0.1:5000";

fn request(header: &str, lines: &[String]) -> Parts {
    let mut b = http::Request::builder();
    for l in lines {
        b = b.header(header, l.as_str());
    }
    let (mut p, ()) = b.body(()).unwrap().into_parts();
    p.extensions.insert(PEER.parse::<SocketAddr>().unwrap());
    p
}

fn client(source: ForwardedSource) -> ClientIp {
    ClientIp::new()
        .trusted_proxies(["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()])
        .source(source)
}

/// Splits rendered hops over 1 to 3 header lines, with padding.
fn lines(parts: Vec<String>, cuts: &[usize], pad: &str) -> Vec<String> {
    let mut out = vec![Vec::new()];
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 && cuts.contains(&i) {
            out.push(Vec::new());
        }
        out.last_mut().unwrap().push(format!("{pad}{p}{pad}"));
    }
    out.into_iter().map(|l| l.join(",")).collect()
}

proptest! {
    #[test]
    fn x_forwarded_for_resolves_as_the_model(
        hops in prop::collection::vec(hop(), 1..8),
        cuts in prop::collection::vec(1usize..8, 0..3),
        pad in prop::sample::select(vec!["", " ", "  "]),
    ) {
        let rendered: Vec<String> = hops.iter().map(Hop::render).collect();
        let parts = request("x-forwarded-for", &lines(rendered, &cuts, pad));
        let got = client(ForwardedSource::XForwardedFor).resolve(&parts).unwrap();
        let peer: SocketAddr = PEER.parse().unwrap();
        prop_assert_eq!(got, oracle(&hops).unwrap_or(peer.ip()));
        // The key is the resolved address, grouped as documented.
        let key = client(ForwardedSource::XForwardedFor).extract(&parts).unwrap();
        prop_assert_eq!(key, Principal::ip(got));
    }

    #[test]
    fn forwarded_resolves_as_the_model(
        hops in prop::collection::vec(hop(), 1..8),
        cuts in prop::collection::vec(1usize..8, 0..3),
        quote_all in any::<bool>(),
        extra in prop::sample::select(vec!["", "proto=https;", "by=10.0.0.1;", "host=example.com;"]),
    ) {
        let rendered: Vec<String> = hops
            .iter()
            .map(|h| {
                let v = h.render();
                match h {
                    // An element without for= is garbage too.
                    Hop::Garbage("") => "proto=http".to_owned(),
                    _ if quote_all || v.contains(':') || v.contains('[') => {
                        format!("{extra}for=\"{v}\"")
                    }
                    _ => format!("{extra}for={v}"),
                }
            })
            .collect();
        let parts = request("forwarded", &lines(rendered, &cuts, ""));
        let got = client(ForwardedSource::Forwarded).resolve(&parts).unwrap();
        let peer: SocketAddr = PEER.parse().unwrap();
        prop_assert_eq!(got, oracle(&hops).unwrap_or(peer.ip()));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_the_headers_say(
        hops in prop::collection::vec(hop(), 0..8),
        peer in any::<[u8; 4]>().prop_map(|mut o| {
            if o[0] == 10 {
                o[0] = 11;
            }
            o
        }),
    ) {
        let rendered: Vec<String> = hops.iter().map(Hop::render).collect();
        let mut parts = request("x-forwarded-for", &lines(rendered, &[], ""));
        let peer = SocketAddr::from((peer, 443));
        parts.extensions.insert(peer);
        let got = client(ForwardedSource::XForwardedFor).resolve(&parts).unwrap();
        prop_assert_eq!(got, peer.ip());
    }
}
