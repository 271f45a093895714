//! Property tests of the framework as a whole: each drives a `SchedulerCache` through
//! generated event sequences and checks what must hold whatever the order (the cache's counts
//! and handoffs in `cache_properties.rs`, queue order and nominations in
//! `queue_properties.rs`, preemption's victims in `priority_properties.rs`, bound workspaces
//! in `workspace_properties.rs`, fair sharing among submitters in `fairness_properties.rs`).

mod cache_properties;
mod fairness_properties;
mod priority_properties;
mod queue_properties;
mod workspace_properties;

/// A tiny deterministic generator, so a failing case replays exactly.
pub(super) struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}
