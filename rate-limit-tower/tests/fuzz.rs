//! Property-based fuzzing of client-IP resolution, with an oracle: hops are generated as a
//! model (addresses trusted or not, IPv4, IPv6, IPv4-mapped, with and without ports and
//! brackets, padding, garbage), rendered as `X-Forwarded-For` lines or RFC 7239
//! `Forwarded` elements, and the extractor's answer must be the model's: the rightmost hop
//! that is not a trusted proxy; all trusted, the leftmost; garbage where the walk reaches
//! it (bytes outside ASCII among it), or no element at all, a 400 — never the trusted peer;
//! garbage left of the client never matters, on any line. `X-Real-IP` (one address a
//! platform sets) is its last line's hop, alone or before `X-Forwarded-For`. The rate-limit headers are rendered from generated decisions
//! and parsed back (RFC 9651 lists, re-serialized and parsed again) against a model of what
//! they must say. CI runs proptest's default case count; `scripts/fuzz.sh` runs millions.
//!
//! A test binary of its own: garbage hops log `rate_limit.forwarded_invalid`, which the
//! layer tests' log assertions would otherwise count.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use std::time::Duration;

use http::request::Parts;
use http::{HeaderMap, HeaderName};
use proptest::prelude::*;
use ratekeeper_core::{Answer, Chain, ChainDecision, Decision, Limit, Outcome, Principal};
use ratekeeper_tower::extract::{ClientIp, ForwardedSource, KeyExtractor};
use ratekeeper_tower::{Answering, HeaderStyle, Verdict};

#[derive(Debug, Clone)]
enum Hop {
    V4(Ipv4Addr, Option<u16>),
    /// Bracketed (then maybe a port) or bare.
    V6(Ipv6Addr, bool, Option<u16>),
    /// `::ffff:a.b.c.d`: counts as the IPv4 address.
    Mapped(Ipv4Addr),
    /// Bytes that are no address: words, obs-text (0x80–0xff), a lone quote. An empty
    /// one is an empty list element, which `X-Forwarded-For` skips.
    Garbage(&'static [u8]),
}

impl Hop {
    fn ip(&self) -> Option<IpAddr> {
        match self {
            Self::V4(ip, _) | Self::Mapped(ip) => Some(IpAddr::V4(*ip)),
            Self::V6(ip, ..) => Some(IpAddr::V6(*ip)),
            Self::Garbage(_) => None,
        }
    }

    fn render(&self) -> Vec<u8> {
        match self {
            Self::V4(ip, None) => ip.to_string(),
            Self::V4(ip, Some(p)) => format!("{ip}:{p}"),
            Self::V6(ip, false, _) => ip.to_string(),
            Self::V6(ip, true, None) => format!("[{ip}]"),
            Self::V6(ip, true, Some(p)) => format!("[{ip}]:{p}"),
            Self::Mapped(ip) => format!("::ffff:{ip}"),
            Self::Garbage(g) => return g.to_vec(),
        }
        .into_bytes()
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
            &b"unknown"[..], b"_hidden", b"", b"1.2.3", b"999.1.1.1", b"[::1", b"::1]",
            b"a.b.c.d", b"1.2.3.4:", b"[2001:db8::1]:x", b"2001:db8::1:443:", b"\x80",
            b"\xff\xfe", b"198.51.100.7\x80", b"\xa0198.51.100.7", b"\"", b"\"\x80",
        ])
        .prop_map(Hop::Garbage),
    ]
}

/// The model's answer for a header that is present: `Err` is the 400. With `skip_empty`
/// (`X-Forwarded-For`), empty elements are no hops.
fn oracle(hops: &[Hop], skip_empty: bool) -> Result<IpAddr, ()> {
    let mut leftmost = None;
    for h in hops.iter().rev() {
        match h.ip() {
            None if skip_empty && matches!(h, Hop::Garbage(b"")) => {}
            None => return Err(()),
            Some(ip) if trusted(ip) => leftmost = Some(ip),
            Some(ip) => return Ok(ip),
        }
    }
    leftmost.ok_or(())
}

/// What the extractor answered: the client, or the 400 (whose code is checked).
fn answer(c: &ClientIp, parts: &Parts) -> Result<IpAddr, ()> {
    c.resolve(parts).map_err(|r| {
        assert_eq!(
            (r.status().as_u16(), r.code()),
            (400, "ip.forwarded_invalid")
        );
    })
}

const PEER: &str = "10.0.0.1:5000";

fn request(header: &str, lines: &[Vec<u8>]) -> Parts {
    let mut b = http::Request::builder();
    for l in lines {
        b = b.header(header, http::HeaderValue::from_bytes(l).unwrap());
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
fn lines(parts: Vec<Vec<u8>>, cuts: &[usize], pad: &str) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 && cuts.contains(&i) {
            out.push(Vec::new());
        }
        out.last_mut()
            .unwrap()
            .push([pad.as_bytes(), &p, pad.as_bytes()].concat());
    }
    out.into_iter().map(|l| l.join(&b","[..])).collect()
}

proptest! {
    #[test]
    fn x_forwarded_for_resolves_as_the_model(
        hops in prop::collection::vec(hop(), 1..8),
        cuts in prop::collection::vec(1usize..8, 0..3),
        pad in prop::sample::select(vec!["", " ", "  "]),
    ) {
        let rendered: Vec<Vec<u8>> = hops.iter().map(Hop::render).collect();
        let parts = request("x-forwarded-for", &lines(rendered, &cuts, pad));
        let got = answer(&client(ForwardedSource::XForwardedFor), &parts);
        prop_assert_eq!(got, oracle(&hops, true));
        // The key is the resolved address, grouped as documented.
        let key = client(ForwardedSource::XForwardedFor).extract(&parts);
        prop_assert_eq!(key.ok(), got.ok().map(Principal::ip));
    }

    #[test]
    fn forwarded_resolves_as_the_model(
        hops in prop::collection::vec(hop(), 1..8),
        cuts in prop::collection::vec(1usize..8, 0..3),
        quote_all in any::<bool>(),
        extra in prop::sample::select(vec!["", "proto=https;", "by=10.0.0.1;", "host=example.com;"]),
    ) {
        let rendered: Vec<Vec<u8>> = hops
            .iter()
            .map(|h| {
                let v = h.render();
                match h {
                    // An element without for= is garbage too.
                    Hop::Garbage(b"") => b"proto=http".to_vec(),
                    _ if quote_all || v.contains(&b':') || v.contains(&b'[') => {
                        [extra.as_bytes(), b"for=\"", &v, b"\""].concat()
                    }
                    _ => [extra.as_bytes(), b"for=", &v].concat(),
                }
            })
            .collect();
        let parts = request("forwarded", &lines(rendered, &cuts, ""));
        let got = answer(&client(ForwardedSource::Forwarded), &parts);
        prop_assert_eq!(got, oracle(&hops, false));
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
        let rendered: Vec<Vec<u8>> = hops.iter().map(Hop::render).collect();
        let mut parts = request("x-forwarded-for", &lines(rendered, &[], ""));
        let peer = SocketAddr::from((peer, 443));
        parts.extensions.insert(peer);
        let got = client(ForwardedSource::XForwardedFor).resolve(&parts).unwrap();
        prop_assert_eq!(got, peer.ip());
    }
}

fn real_ip() -> HeaderName {
    HeaderName::from_static("x-real-ip")
}

/// The model for a single-address header: `None` when absent; else its last line's hop,
/// garbage (`Err`) the 400.
fn header_oracle(lines: &[Hop]) -> Option<Result<IpAddr, ()>> {
    lines.last().map(|h| h.ip().ok_or(()))
}

/// A limit's decision as generated: any outcome, numbers from small to past what a
/// structured-field integer holds, times from 0 to days, in µs.
#[derive(Debug, Clone)]
struct Gen {
    name: String,
    outcome: Outcome,
    quota: u64,
    remaining: u64,
    reset_us: u64,
    retry_us: u64,
    window_us: u64,
}

fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..1_000,
        2 => 0u64..10_000_000,
        1 => 999_999_999_999_990u64..1_000_000_000_000_010,
        1 => any::<u64>(),
    ]
}

fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..2_000_000,
        2 => 0u64..100_000_000_000,
        1 => prop::sample::select(vec![0u64, 1, 999_999, 1_000_000, 1_000_001]),
    ]
}

fn decision() -> impl Strategy<Value = Gen> {
    (
        "[A-Za-z0-9._-]{1,24}",
        prop::sample::select(vec![Outcome::Allowed, Outcome::Denied, Outcome::NeverFits]),
        number(),
        number(),
        micros(),
        micros(),
        micros().prop_map(|w| w.max(1)),
    )
        .prop_map(
            |(name, outcome, quota, remaining, reset_us, retry_us, window_us)| Gen {
                name,
                outcome,
                quota,
                remaining: remaining.min(quota),
                reset_us,
                retry_us,
                window_us,
            },
        )
}

const SF_MAX: u64 = 999_999_999_999_999;

/// What the headers must say about one limit: (q, w, r, t, retry-after).
fn expected(g: &Gen) -> (u64, u64, u64, u64, Option<u64>) {
    let secs = |us: u64| us.div_ceil(1_000_000);
    let min_retry = u64::try_from(Decision::MIN_RETRY_AFTER.as_micros()).unwrap();
    // A denial's retry-after is at least the minimum, and its reset at least that.
    let (retry_us, reset_us) = match g.outcome {
        Outcome::Denied => {
            let r = g.retry_us.max(min_retry);
            (Some(r), g.reset_us.max(r))
        }
        _ => (None, g.reset_us),
    };
    let retry = retry_us.map(|r| secs(r).max(1));
    let t = retry.unwrap_or_else(|| secs(reset_us));
    (
        g.quota.min(SF_MAX),
        secs(g.window_us).clamp(1, SF_MAX),
        g.remaining.min(SF_MAX),
        t.min(SF_MAX),
        retry,
    )
}

/// A structured-field list of `"name";a=1;b=2` members: (name, a, b) each. Serialized and
/// parsed again, it must come back the same.
fn parse_list(raw: &str, keys: [&str; 2]) -> Result<Vec<(String, u64, u64)>, TestCaseError> {
    let list = sfv::Parser::new(raw.as_bytes())
        .parse::<sfv::List>()
        .map_err(|e| TestCaseError::fail(format!("{raw}: {e}")))?;
    let rendered = sfv::FieldType::serialize(&list)
        .ok_or_else(|| TestCaseError::fail(format!("{raw}: cannot be serialized")))?;
    // Our rendering is already the canonical one.
    prop_assert_eq!(rendered.as_str(), raw);
    let again = sfv::Parser::new(rendered.as_bytes())
        .parse::<sfv::List>()
        .map_err(|e| TestCaseError::fail(format!("re-serialized {raw}: {e}")))?;
    prop_assert_eq!(&list, &again);
    list.iter()
        .map(|m| match m {
            sfv::ListEntry::Item(i) => {
                let int = |k: &str| {
                    i.params
                        .get(k)
                        .and_then(|v| v.as_integer())
                        .and_then(|n| u64::try_from(i64::from(n)).ok())
                        .ok_or_else(|| TestCaseError::fail(format!("{raw}: no {k}")))
                };
                let name = i
                    .bare_item
                    .as_string()
                    .ok_or_else(|| TestCaseError::fail(format!("{raw}: not a string")))?
                    .as_str()
                    .to_owned();
                prop_assert_eq!(i.params.len(), 2, "{}", raw);
                Ok((name, int(keys[0])?, int(keys[1])?))
            }
            sfv::ListEntry::InnerList(_) => Err(TestCaseError::fail(format!("{raw}: inner list"))),
        })
        .collect()
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).map(|v| v.to_str().unwrap().to_owned())
}

proptest! {
    #[test]
    fn x_real_ip_is_its_last_lines_hop_or_the_peer(
        hops in prop::collection::vec(hop(), 1..4),
        pad in prop::sample::select(vec!["", " "]),
    ) {
        let rendered: Vec<Vec<u8>> = hops
            .iter()
            .map(|h| [pad.as_bytes(), &h.render(), pad.as_bytes()].concat())
            .collect();
        let parts = request("x-real-ip", &rendered);
        let got = answer(&client(ForwardedSource::Header(real_ip())), &parts);
        prop_assert_eq!(Some(got), header_oracle(&hops));
        let key = client(ForwardedSource::Header(real_ip())).extract(&parts);
        prop_assert_eq!(key.ok(), got.ok().map(Principal::ip));
    }

    #[test]
    fn x_real_ip_then_x_forwarded_for_takes_the_header_when_it_is_there(
        real in prop::collection::vec(hop(), 0..3),
        xff in prop::collection::vec(hop(), 1..6),
    ) {
        let mut parts = request("x-forwarded-for", &lines(xff.iter().map(Hop::render).collect(), &[], ""));
        for h in &real {
            parts
                .headers
                .append("x-real-ip", http::HeaderValue::from_bytes(&h.render()).unwrap());
        }
        let got = answer(&client(ForwardedSource::HeaderThenXForwardedFor(real_ip())), &parts);
        let want = header_oracle(&real).unwrap_or_else(|| oracle(&xff, true));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn rate_limit_headers_parse_back_to_what_was_decided(
        gens in prop::collection::vec(decision(), 1..5),
    ) {
        let limits: Vec<Limit> = gens
            .iter()
            .map(|g| Limit::fixed_window(&g.name, 10, Duration::from_secs(1)).unwrap())
            .collect();
        let chain = limits
            .iter()
            .fold(Chain::new(), |c, l| c.check(l, Principal::user("u")));
        let decisions: Vec<Decision> = gens
            .iter()
            .map(|g| Decision::from_parts(g.outcome, g.quota, g.remaining, g.reset_us, g.retry_us, g.window_us))
            .collect();
        let answer = Answer::Store(ChainDecision::new(decisions));
        let answering = Answering::new().headers(HeaderStyle::Both);
        let h = match answering.verdict_for(answer, &chain) {
            Verdict::Refuse(refusal) => {
                let resp = answering.respond(refusal, &HeaderMap::new());
                prop_assert_eq!(resp.status(), 429);
                resp.headers().clone()
            }
            Verdict::Proceed(info) => {
                let mut h = HeaderMap::new();
                answering.write(&info.expect("a decided chain has headers"), &mut h);
                h
            }
        };
        let want: Vec<_> = gens.iter().map(expected).collect();
        let names: Vec<&str> = gens.iter().map(|g| g.name.as_str()).collect();
        // RateLimit-Policy and RateLimit: every limit, in chain order.
        let policy = parse_list(&header(&h, "ratelimit-policy").unwrap(), ["q", "w"])?;
        let state = parse_list(&header(&h, "ratelimit").unwrap(), ["r", "t"])?;
        for (i, w) in want.iter().enumerate() {
            prop_assert_eq!(&policy[i], &(names[i].to_owned(), w.0, w.1));
            prop_assert_eq!(&state[i], &(names[i].to_owned(), w.2, w.3));
        }
        prop_assert_eq!(policy.len(), gens.len());
        // The single-valued trio: the limit that refused, else the one with the fewest
        // units left (ties: the later reset).
        let denied = gens.iter().position(|g| g.outcome != Outcome::Allowed);
        let head = denied.unwrap_or_else(|| {
            (0..gens.len())
                .min_by(|&a, &b| {
                    let reset = |g: &Gen| expected_reset_us(g);
                    gens[a].remaining.cmp(&gens[b].remaining).then(reset(&gens[b]).cmp(&reset(&gens[a])))
                })
                .unwrap()
        });
        let int = |n: &str| header(&h, n).map(|v| v.parse::<u64>().unwrap());
        prop_assert_eq!(int("ratelimit-limit"), Some(want[head].0));
        prop_assert_eq!(int("ratelimit-remaining"), Some(want[head].2));
        prop_assert_eq!(int("ratelimit-reset"), Some(want[head].3));
        // Retry-After: whole seconds, at least 1, exactly when a limit refused with one.
        let retry = denied.and_then(|i| want[i].4);
        prop_assert_eq!(int("retry-after"), retry);
        if let Some(r) = retry {
            prop_assert!(r >= 1);
        }
    }
}

/// The reset the store keeps for a decision (a denial's is at least its retry-after).
fn expected_reset_us(g: &Gen) -> u64 {
    match g.outcome {
        Outcome::Denied => {
            let min_retry = u64::try_from(Decision::MIN_RETRY_AFTER.as_micros()).unwrap();
            g.reset_us.max(g.retry_us.max(min_retry))
        }
        _ => g.reset_us,
    }
}
