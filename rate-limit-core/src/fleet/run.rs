//! Keeping an instance in step: a read on every period, and one as soon as the store's
//! notice of a change arrives (on Redis, a subscriber on a connection of its own; on the
//! memory store, at once).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Fleet;
use crate::protocol::fleet::FleetNotices;
use crate::protocol::{SharedState, Store};

/// The shortest gap between two reads a run makes, whatever the notices: a flood of
/// notices costs each instance at most this many reads a second (50), never a stall.
const MIN_GAP: Duration = Duration::from_millis(20);

impl<S: Store + SharedState + Clone> Fleet<S> {
    /// Keeps this instance in step with the store for as long as the returned future runs
    /// (spawn it): reads the state every `period`, and at once when the store's notice of a
    /// change arrives. On Redis a subscriber on a connection of its own receives the
    /// notices; a notice lost (the connection broken, a failover) is healed by the next
    /// periodic read, and the subscriber reconnects at each period until it is back
    /// ([`Applied::listening`](super::Applied::listening) says which).
    ///
    /// A period of 1 s bounds the time to apply a change at a second even with no notice,
    /// at two small reads a second per instance; with notices a change applies within a
    /// round trip or two of its write.
    pub async fn run(self, period: Duration) {
        let period = period.max(MIN_GAP);
        let wake = Arc::new(Notify::new());
        let _listener = self.listen(period, &wake);
        let _hitters = self.share_hitters();
        // The first read at once: an instance obeys the fleet from its first request.
        let _ = self.sync().await;
        let mut next = Instant::now() + period;
        loop {
            if tokio::time::timeout_at(next, wake.notified())
                .await
                .is_err()
            {
                next = Instant::now() + period;
            }
            let _ = self.sync().await;
            tokio::time::sleep(MIN_GAP).await;
        }
    }

    /// Starts publishing this instance's heavy hitters.
    fn share_hitters(&self) -> Abort {
        let fleet = self.clone();
        Abort(tokio::spawn(async move {
            let mut tick = tokio::time::interval(fleet.hitters_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                fleet.publish_hitters().await;
            }
        }))
    }

    /// Starts the subscriber, on a store that sends notices; stopped when dropped.
    fn listen(&self, period: Duration, wake: &Arc<Notify>) -> Abort {
        let (fleet, wake) = (self.clone(), wake.clone());
        Abort(tokio::spawn(async move {
            // Said once per outage, not once per period.
            let mut said = false;
            loop {
                match fleet.store.fleet_notices(period).await {
                    Err(e) if !said => {
                        said = true;
                        tracing::warn!(
                            target: "rate_limit.fleet",
                            error = %e,
                            "no notices from the store: changes apply at each periodic read"
                        );
                    }
                    Err(_) => {}
                    Ok(notices) => {
                        said = false;
                        fleet.follow(notices, &wake).await;
                    }
                }
                tokio::time::sleep(period).await;
            }
        }))
    }

    /// Reads notices until the store's channel ends.
    async fn follow(&self, mut notices: FleetNotices, wake: &Notify) {
        self.update(|a| a.listening = true);
        // Whatever was written while no one listened: read it now.
        wake.notify_one();
        while notices.next().await.is_some() {
            wake.notify_one();
        }
        self.update(|a| a.listening = false);
    }
}

/// A task aborted when this is dropped (the run's subscriber ends with the run).
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}
