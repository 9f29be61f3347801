//! The conformance suite's bans, on every store (`conformance::suite` runs them).

use std::time::Duration;

use ratekeeper_core::{AnyStore, Chain, Check, Limit, Principal, Store};

use crate::support::run;

const MINUTE: Duration = Duration::from_secs(60);

/// Bans: refusals by later checks of the same principal count, in every chain mode; a
/// banned principal is refused by the ban and charges nothing; a charge counts refusals;
/// a reset lifts; a ban ends by itself.
pub(crate) async fn bans(store: &AnyStore) {
    let one = Limit::fixed_window("ban-one", 1, MINUTE).unwrap();
    let ip = Principal::ip("203.0.113.9".parse().unwrap());
    let other = Principal::ip("203.0.113.10".parse().unwrap());
    for (n, mode) in [
        ratekeeper_core::ChainMode::InOrder,
        ratekeeper_core::ChainMode::ChargeAll,
        ratekeeper_core::ChainMode::CountAttempts,
    ]
    .into_iter()
    .enumerate()
    {
        let ban = Limit::ban(&format!("ban-{n}"), 3, MINUTE, MINUTE).unwrap();
        let chain = Chain::new()
            .mode(mode)
            .check(&ban, ip.clone())
            .check(&one, ip.clone());
        store.reset(&one.key(ip.clone())).await.unwrap();
        let (s, ds) = run(store, &chain, 5).await;
        assert_eq!(s, "ADDDD", "{mode:?}");
        // The ban's decision never headlines an admission.
        assert!(!ds[0].headline().unwrap().is_ban());
        assert_eq!(ds[0].decisions()[0].remaining(), 3);
        assert_eq!(ds[2].decisions()[0].remaining(), 2, "{mode:?}");
        let (by, d) = ds[4].denied_by().unwrap();
        assert!(
            by == 0 && d.is_ban(),
            "{mode:?}: the fourth refusal is the ban's"
        );
        let left = d.retry_after().unwrap();
        assert!(
            left > MINUTE - Duration::from_secs(5) && left <= MINUTE,
            "{left:?}"
        );
        // Banned: the limit behind it is not even read (nothing is counted).
        assert_eq!(ds[4].decisions().len(), 1);
        let peek = store.peek(&ban.key(ip.clone())).await.unwrap();
        assert!(peek.is_banned() && !peek.would_admit(1));
        let listed = store.bans(&ban).await.unwrap();
        assert_eq!(listed.len(), 1, "{mode:?}");
        assert_eq!(listed[0].principal(), &ip);
        assert!(listed[0].remaining() <= left);
        // Another principal's refusals never count towards this ban.
        let cross = Chain::new()
            .mode(mode)
            .check(&ban, other.clone())
            .check(&one, ip.clone());
        let (s, _) = run(store, &cross, 1).await;
        assert_eq!(s, "D");
        store.reset(listed[0].key()).await.unwrap();
        let (s, _) = run(store, &cross, 4).await;
        assert_eq!(s, "DDDD", "{mode:?}");
        assert_eq!(
            store
                .peek(&ban.key(other.clone()))
                .await
                .unwrap()
                .remaining(),
            3
        );
        // A reset of the listed key lifted it.
        assert!(
            store
                .peek(&ban.key(ip.clone()))
                .await
                .unwrap()
                .would_admit(1)
        );
        assert!(store.bans(&ban).await.unwrap().is_empty());
    }
    // A charge counts its cost in refusals.
    let ban = Limit::ban("ban-charged", 2, MINUTE, MINUTE).unwrap();
    let d = store
        .charge(&Check::new(ban.key(ip.clone()), 1))
        .await
        .unwrap();
    assert!(d.is_allowed() && d.is_ban() && d.remaining() == 1);
    let d = store
        .charge(&Check::new(ban.key(ip.clone()), 1))
        .await
        .unwrap();
    assert!(!d.is_allowed() && d.is_ban());
    // A short ban ends by itself.
    let short = Limit::ban("ban-short", 1, MINUTE, Duration::from_millis(300)).unwrap();
    let chain = Chain::new()
        .check(&short, ip.clone())
        .check(&one, ip.clone());
    let (s, ds) = run(store, &chain, 2).await;
    assert_eq!(s, "DD");
    assert!(ds[1].denied_by().unwrap().1.is_ban());
    tokio::time::sleep(ds[1].denied_by().unwrap().1.retry_after().unwrap()).await;
    let d = store.check(&chain).await.unwrap();
    assert_eq!(
        d.denied_by().map(|(i, _)| i),
        Some(1),
        "the ban ended; the limit refuses"
    );
}
