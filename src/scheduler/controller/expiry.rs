//! The leader's heartbeat timer: at every heartbeat expiry the cache learns that Runtime Pod
//! is unavailable (a Runtime Pod event for the queue), and the Pending Runs it concerns are
//! woken. What becomes of the Runs that Pod held is the manager's Runtime Pod lifecycle
//! controller's ([`crate::manager::lifecycle`]); this loop writes nothing.

use std::sync::Arc;
use std::time::Duration;

use super::Scheduler;

/// How often the loop applies heartbeat expiries at the least.
const EXPIRY_PERIOD: Duration = Duration::from_secs(1);

impl Scheduler {
    /// Applies the heartbeat expiries as they come, at the next one or at least every
    /// [`EXPIRY_PERIOD`], and wakes the Pending Runs they concern.
    pub(super) async fn expire_heartbeats(self: Arc<Self>) {
        let mut last = jiff::Timestamp::now();
        loop {
            let now = jiff::Timestamp::now();
            let next = self.cache.lock().expire(last, now);
            last = now;
            self.woke();
            let until_next = next
                .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                .map_or(EXPIRY_PERIOD, |d| d.min(EXPIRY_PERIOD));
            tokio::time::sleep(until_next.max(Duration::from_millis(10))).await;
        }
    }
}
