//! The shared-state conformance suite: what every [`SharedState`] store must do, run
//! against the memory store, Redis, a Cluster and a boxed store in this crate's tests, and
//! by a store of your own in yours.

use std::time::Duration;

use crate::protocol::fleet::{FleetChange, FleetMark, FleetRead, FleetState};
use crate::protocol::pace::{PaceCall, PaceOp};
use crate::protocol::{SharedState, Slots, Store, StoreErrorKind};
use crate::{Chain, InFlight, Limit, Principal, PrincipalKind};

/// Runs the shared-state conformance suite on stores made by `fresh` (each call a store
/// holding no fleet state: a new memory store, a Redis store under a prefix of its own).
/// Panics, naming the rule, at the first one broken.
///
/// It checks the fleet (changes, epochs, catching up from a mark, restores only onto
/// nothing, the codec's round trip, notices when the store sends them), heavy-hitter
/// reports, one pacer call, bans listed and lifted, and in-flight slots.
///
/// ```
/// use ratekeeper_core::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// ratekeeper_core::testing::shared_state(MemoryStore::new).await;
/// # });
/// ```
pub async fn shared_state<S, F>(fresh: F)
where
    S: Store + SharedState + Slots + Clone,
    F: Fn() -> S,
{
    fleet_history(&fresh()).await;
    fleet_restore(&fresh()).await;
    fleet_notices(&fresh()).await;
    hitters(&fresh()).await;
    pacer(&fresh()).await;
    bans(&fresh()).await;
    slots(&fresh()).await;
}

fn mark_at(epoch: u64, version: u64, tip: u64) -> FleetMark {
    FleetMark {
        epoch,
        version,
        tip,
    }
}

fn quota(limit: &str, quota: u64) -> FleetChange {
    FleetChange::Quota {
        limit: limit.into(),
        quota,
    }
}

fn vip(quota: u64) -> FleetChange {
    FleetChange::Override {
        limit: "poll".into(),
        principal: Principal::participant("vip"),
        quota,
    }
}

fn sorted(mut entries: Vec<FleetChange>) -> Vec<String> {
    let mut out: Vec<String> = entries
        .drain(..)
        .map(|e| crate::protocol::fleet::codec::encode_change(&e))
        .collect();
    out.sort();
    out
}

async fn fleet_history<S: SharedState>(s: &S) {
    let mark = s.fleet_mark().await.expect("fleet_mark");
    assert_eq!(mark, FleetMark::EMPTY, "a fresh store holds no fleet state");
    let held = mark_at(9, 3, 9);
    let refused = s.fleet_change(&quota("poll", 5), held, 7).await.unwrap();
    assert_eq!(
        refused, None,
        "a change on an empty store by an instance holding a state is refused (it restores first)"
    );
    let one = s
        .fleet_change(&quota("poll", 5), FleetMark::EMPTY, 7)
        .await
        .unwrap();
    let e = mark_at(7, 1, 7);
    assert_eq!(
        one,
        Some(e),
        "the first change starts the caller's epoch at version 1, its stamp the tip"
    );
    let two = s.fleet_change(&vip(40), e, 8).await.unwrap();
    assert_eq!(
        two,
        Some(mark_at(7, 2, 8)),
        "one epoch, the version up by one, the change's stamp the tip"
    );
    let lift = FleetChange::LiftBan {
        ban: "guard".into(),
        principal: Principal::ip("192.0.2.1".parse().unwrap()),
    };
    let clear = FleetChange::ClearOverride {
        limit: "poll".into(),
        principal: Principal::participant("vip"),
    };
    let setting = FleetChange::Setting {
        name: "allow".into(),
        value: "10.0.0.0/8\n192.0.2.0/24 # two lines".into(),
    };
    for (c, fresh) in [(&lift, 9), (&clear, 10), (&setting, 11)] {
        s.fleet_change(c, e, fresh)
            .await
            .unwrap()
            .expect("a change on a state");
    }
    let now = mark_at(7, 5, 11);
    assert_eq!(s.fleet_mark().await.unwrap(), now);
    fleet_reads(s, e, now, [vip(40), lift, clear, setting]).await;
}

/// Reads of the state `fleet_history` made: from `e` (version 1) to `now`, by `made`.
async fn fleet_reads<S: SharedState>(s: &S, e: FleetMark, now: FleetMark, made: [FleetChange; 4]) {
    let setting = made[3].clone();
    let since = s.fleet_read(e).await.unwrap();
    assert_eq!(
        since,
        FleetRead::Since {
            mark: now,
            changes: made.to_vec(),
        },
        "a reader of the store's epoch gets the changes after its mark, in order, decoded as made"
    );
    let from_nothing = s.fleet_read(FleetMark::EMPTY).await.unwrap();
    assert!(
        matches!(&from_nothing, FleetRead::Since { changes, .. } if changes.len() == 5),
        "a reader holding nothing starts every epoch: {from_nothing:?}"
    );
    assert_eq!(
        s.fleet_read(now).await.unwrap(),
        FleetRead::Since {
            mark: now,
            changes: Vec::new()
        },
        "a reader up to date gets nothing"
    );
    for other in [
        mark_at(99, 1, 99),
        mark_at(7, 9, 9),
        mark_at(7, 1, 12_345),
        mark_at(7, 5, 4),
    ] {
        let FleetRead::Whole(state) = s.fleet_read(other).await.unwrap() else {
            panic!(
                "a reader on another history, ahead of the store, or whose change at its version \
                 is not the store's, reads the whole state: {other:?}"
            );
        };
        assert_eq!(state.mark, now);
        assert_eq!(
            sorted(state.entries),
            sorted(vec![quota("poll", 5), setting.clone()]),
            "the whole state: the quota and the setting (the override cleared, a lift is no entry)"
        );
    }
}

async fn fleet_restore<S: SharedState>(s: &S) {
    let state = FleetState {
        mark: mark_at(41, 12, 5),
        entries: vec![quota("poll", 3), vip(6)],
    };
    let put = s.fleet_restore(&state).await.unwrap();
    assert_eq!(
        put, state.mark,
        "a state is put back onto an empty store, mark and all"
    );
    let FleetRead::Whole(read) = s.fleet_read(FleetMark::EMPTY).await.unwrap() else {
        panic!("a restored state has no log: a reader from nothing reads it whole");
    };
    assert_eq!(read.mark, state.mark);
    assert_eq!(sorted(read.entries), sorted(state.entries.clone()));
    let other = FleetState {
        mark: mark_at(5, 30, 6),
        entries: vec![quota("poll", 1)],
    };
    assert_eq!(
        s.fleet_restore(&other).await.unwrap(),
        state.mark,
        "a restore never writes over a state, even an older one"
    );
    let next = s
        .fleet_change(&quota("poll", 4), state.mark, 77)
        .await
        .unwrap();
    assert_eq!(
        next,
        Some(mark_at(41, 13, 77)),
        "a change goes on top of a restored state, in its epoch"
    );
}

async fn fleet_notices<S: SharedState>(s: &S) {
    let mut notices = match s.fleet_notices(Duration::from_secs(5)).await {
        Ok(n) => n,
        Err(e) if e.kind() == StoreErrorKind::Unsupported => return,
        Err(e) => panic!("fleet_notices: {e}"),
    };
    s.fleet_change(&quota("poll", 2), FleetMark::EMPTY, 3)
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), notices.next()).await;
    assert!(
        matches!(got, Ok(Some(_))),
        "a change is noticed by a subscriber: {got:?}"
    );
}

async fn hitters<S: SharedState>(s: &S) {
    let minute = Duration::from_secs(60);
    s.hitters_put("poll", "a", "report a", minute)
        .await
        .unwrap();
    s.hitters_put("poll", "b", "report b\nsecond line", minute)
        .await
        .unwrap();
    s.hitters_put("poll", "a", "report a2", minute)
        .await
        .unwrap();
    s.hitters_put("other", "c", "report c", minute)
        .await
        .unwrap();
    let mut read = s.hitters_read("poll").await.unwrap();
    read.sort();
    assert_eq!(
        read,
        [
            ("a".to_owned(), "report a2".to_owned()),
            ("b".to_owned(), "report b\nsecond line".to_owned())
        ],
        "each instance's latest report of the limit, as put"
    );
    assert!(s.hitters_read("none").await.unwrap().is_empty());
}

async fn pacer<S: SharedState>(s: &S) {
    let scope = Principal::new(PrincipalKind::custom("pacer").unwrap(), "example.org");
    let call = |op| PaceCall {
        name: "conformance",
        scope: &scope,
        op,
        successes: 0,
        worker: 1,
        registration: Duration::from_secs(60),
        remember: Duration::from_secs(60),
        config: crate::limit::Aimd {
            initial: 1.0,
            ..crate::limit::Aimd::default()
        },
    };
    let first = s.pace(&call(PaceOp::Acquire { within: 0 })).await.unwrap();
    assert!(first.go, "the first call of a scope goes");
    assert_eq!(first.workers, 1);
    let second = s.pace(&call(PaceOp::Acquire { within: 0 })).await.unwrap();
    assert!(!second.go, "at a call a second, the next one waits");
    assert!(
        second.wait_us > 0 && second.wait_us <= 1_000_000,
        "{second:?}"
    );
    let third = s
        .pace(&call(PaceOp::Acquire { within: 2_000_000 }))
        .await
        .unwrap();
    assert!(
        third.go && third.wait_us > 0,
        "a slot reserved within the bound: {third:?}"
    );
}

async fn bans<S: Store + SharedState>(s: &S) {
    let minute = Duration::from_secs(60);
    let ban = Limit::ban("conformance-ban", 1, minute, minute).unwrap();
    let per = Limit::fixed_window("conformance-per", 1, minute).unwrap();
    let who = Principal::participant("flooder");
    // A ban counts the refusals of the limits after it in the chain.
    let chain = Chain::new()
        .check(&ban, who.clone())
        .check(&per, who.clone());
    for _ in 0..10 {
        let d = s.check(&chain).await.unwrap();
        if d.denied_by().is_some_and(|(_, d)| d.is_ban()) {
            break;
        }
    }
    let listed = s.bans(&ban).await.unwrap();
    assert_eq!(listed.len(), 1, "the banned principal is listed");
    assert_eq!(listed[0].principal(), &who);
    assert!(listed[0].remaining() > Duration::ZERO && listed[0].remaining() <= minute);
    s.reset(listed[0].key()).await.unwrap();
    s.forget_cached(listed[0].key());
    assert!(
        s.bans(&ban).await.unwrap().is_empty(),
        "a reset lifts the ban"
    );
    let after = s.check(&chain).await.unwrap();
    assert!(
        !after.denied_by().is_some_and(|(_, d)| d.is_ban()),
        "and bans no more: {after:?}"
    );
}

async fn slots<S: Slots>(s: &S) {
    let limit = InFlight::new("conformance-slots", 1, Duration::from_secs(30)).unwrap();
    let key = limit.slots(Principal::participant("p"));
    assert!(
        s.take_slot(&key, 1).await.unwrap().taken,
        "a free slot is taken"
    );
    let full = s.take_slot(&key, 2).await.unwrap();
    assert!(
        !full.taken && full.in_use == 1,
        "the limit is held: {full:?}"
    );
    assert!(s.renew_slot(&key, 1).await.unwrap(), "a held slot renews");
    s.release_slot(&key, 1).await.unwrap();
    assert!(
        !s.renew_slot(&key, 1).await.unwrap(),
        "a released slot is gone"
    );
    assert!(s.take_slot(&key, 2).await.unwrap().taken, "and free again");
}
