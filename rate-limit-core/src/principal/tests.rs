use super::*;

#[test]
fn literal_and_hashed_forms() {
    assert_eq!(Principal::user("alice").as_str(), "u:alice");
    assert_eq!(Principal::job("resolve").as_str(), "job:resolve");
    assert_eq!(Principal::global().as_str(), "all:*");
    let k = Principal::api_key("abc");
    assert_eq!(k.as_str().len(), "k:~".len() + 32);
    let c = PrincipalKind::custom("visitor-game").unwrap();
    let p = Principal::composite(c, ["1.2.3.4", "quiz"]);
    assert_eq!(p.as_str(), "x.visitor-game:1.2.3.4:quiz");
    // One value under a custom kind renders inline, as the general path would.
    let c = PrincipalKind::custom("k".repeat(32).as_str()).unwrap();
    let v = "v".repeat(96 - 35);
    let inline = Principal::new(c.clone(), &v);
    assert_eq!(inline.as_str(), format!("x.{}:{v}", "k".repeat(32)));
    // 2 + 32 + 1 + 62 > 96: too long to stay literal, so hashed whole, under the prefix.
    let long = Principal::new(c, "v".repeat(62));
    assert!(
        long.as_str()
            .starts_with(&format!("x.{}:~", "k".repeat(32)))
    );
    assert_eq!(long.as_str().len(), 2 + 32 + 1 + 33);
}

#[test]
fn renderings_read_back() {
    for p in [
        Principal::ip("203.0.113.9".parse().unwrap()),
        Principal::ip("2001:db8::1".parse().unwrap()),
        Principal::api_key("sk_live_123"),
        Principal::user("a:b{c}"),
        Principal::global(),
        Principal::new(PrincipalKind::custom("device").unwrap(), "d-1"),
    ] {
        let back = Principal::from_rendered(p.as_str()).unwrap();
        assert_eq!((back.kind(), back.as_str()), (p.kind(), p.as_str()));
    }
    for bad in ["", "ip", "ip:", "zz:1", "u:a{b}", "x.:1"] {
        assert!(Principal::from_rendered(bad).is_none(), "{bad:?}");
    }
}

#[test]
fn ip_grouping() {
    let a = Principal::ip("2001:db8:1:2:aaaa::1".parse().unwrap());
    let b = Principal::ip("2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap());
    let c = Principal::ip("2001:db8:1:3::1".parse().unwrap());
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.as_str(), "ip:2001-db8-1-2--_64");
    let mapped = Principal::ip("::ffff:1.2.3.4".parse().unwrap());
    assert_eq!(mapped, Principal::ip("1.2.3.4".parse().unwrap()));
    assert_eq!(mapped.as_str(), "ip:1.2.3.4");
    let net = Principal::ip_with_prefix("10.1.2.3".parse().unwrap(), 24, 64);
    assert_eq!(net.as_str(), "ip:10.1.2.0_24");
    let zero = Principal::ip_with_prefix("10.1.2.3".parse().unwrap(), 0, 0);
    assert_eq!(zero.as_str(), "ip:0.0.0.0_0");
}

#[test]
fn custom_kind_validation() {
    assert_eq!(
        PrincipalKind::custom("").unwrap_err().code(),
        "limit.name_invalid"
    );
    assert!(PrincipalKind::custom("a:b").is_err());
    assert!(PrincipalKind::custom(&"k".repeat(33)).is_err());
}

#[test]
fn only_principals_the_requester_controls_may_be_banned() {
    use crate::{Chain, Limit};
    use std::time::Duration;
    assert!(PrincipalKind::Ip.may_be_banned() && PrincipalKind::ApiKey.may_be_banned());
    assert!(!PrincipalKind::User.may_be_banned() && !PrincipalKind::Participant.may_be_banned());
    let min = Duration::from_secs(60);
    let ban = Limit::ban("ban", 3, min, min).unwrap();
    let ip = Principal::ip("192.0.2.1".parse().unwrap());
    let ann = Principal::user("ann");
    let window = Limit::fixed_window("w", 3, min).unwrap();
    assert!(ban.may_name(&ip) && !ban.may_name(&ann) && window.may_name(&ann));
    assert!(Chain::new().check(&ban, ip).unowned_ban().is_none());
    let account = Chain::new().check(&ban, Principal::user("ann"));
    assert_eq!(
        account.unowned_ban().map(|c| c.key().limit().name()),
        Some("ban")
    );
}
