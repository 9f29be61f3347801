//! `ClientIp`'s unit tests.

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
    ClientIp::new().trusted_proxies(["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()])
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
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
        // Bytes left of the client are never read: obs-text, a quote, garbage.
        (
            "10.0.0.2:1",
            &[("x-forwarded-for", b"\x80, 198.51.100.7")],
            "198.51.100.7",
        ),
        (
            "10.0.0.2:1",
            &[
                ("x-forwarded-for", b"\xff\xfe\"; garbage"),
                ("x-forwarded-for", b" , 198.51.100.7 ,, 10.0.0.3"),
            ],
            "198.51.100.7",
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
fn a_header_that_names_no_client_is_a_400_never_the_trusted_peer() {
    let c = proxy();
    let bad: &[&[(&str, &[u8])]] = &[
        &[("x-forwarded-for", b"1.1.1.1, garbage, 10.0.0.3")],
        &[("x-forwarded-for", b"198.51.100.7 \x80")],
        &[("x-forwarded-for", &[0xff, 0xfe])],
        &[("x-forwarded-for", b"unknown")],
        &[("x-forwarded-for", b"")],
        &[("x-forwarded-for", b" , ,")],
        &[
            ("x-forwarded-for", b"1.1.1.1"),
            ("x-forwarded-for", b"nope"),
        ],
    ];
    for headers in bad {
        let r = c.resolve(&parts("10.0.0.2:1", headers)).unwrap_err();
        assert_eq!(
            (r.status().as_u16(), r.code()),
            (400, "ip.forwarded_invalid"),
            "{headers:?}"
        );
    }
}

#[test]
fn forwarded_table() {
    let c = proxy().source(ForwardedSource::Forwarded);
    let p = parts(
        "10.0.0.2:1",
        &[(
            "forwarded",
            b"for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.0.0.9;by=10.0.0.2",
        )],
    );
    assert_eq!(c.resolve(&p).unwrap(), ip("2001:db8:cafe::17"));
    let p = parts("10.0.0.2:1", &[("forwarded", b"for=1.1.1.1, for=unknown")]);
    assert_eq!(c.resolve(&p).unwrap_err().code(), "ip.forwarded_invalid");
    // An unterminated quote left of the client swallows nothing a proxy appended.
    let p = parts(
        "10.0.0.2:1",
        &[("forwarded", b"for=\"\x80, for=198.51.100.7;proto=https")],
    );
    assert_eq!(c.resolve(&p).unwrap(), ip("198.51.100.7"));
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
    assert_eq!(c.resolve(&p).unwrap_err().code(), "ip.forwarded_invalid");
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
