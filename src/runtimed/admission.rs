//! The admission cache: a Runtime Pod's annotated capacity and the requests this agent has
//! reserved, keyed by Run UID.
//!
//! This is the execution-time guard of `spec/run-resource-accounting.txt` ("Runtime
//! Admission"): a Run is claimed only after [`AdmissionCache::try_reserve`] has checked and
//! reserved its complete request. It is pure — no I/O, no async, no clock — so that property
//! tests can drive every interleaving. It must not learn about the API server or processes.

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

use crate::api::Resources;
use crate::api::resources::Shortfall;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request was not reserved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The Pod's capacity is not known yet (its Pod has not been observed, or is gone).
    #[error("the capacity of the Runtime Pod is not known yet")]
    CapacityUnknown,
    /// At least one requested resource does not fit on top of the current reservations.
    #[error("{}", NoFitDisplay(.shortfalls))]
    NoFit { shortfalls: Vec<Shortfall> },
}

struct NoFitDisplay<'a>(&'a [Shortfall]);

impl fmt::Display for NoFitDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Capacity plus held reservations. Usage is always the sum of the held reservations.
#[derive(Debug, Clone, Default)]
pub struct AdmissionCache {
    capacity: Option<Resources>,
    reserved: HashMap<String, Resources>,
    used: Resources,
}

impl AdmissionCache {
    /// An empty cache whose capacity is not known yet: nothing can be reserved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the capacity (the complete annotation set of the Pod). Existing reservations
    /// are kept even when they now exceed it; they only block new reservations.
    /// Returns whether the capacity changed.
    pub fn set_capacity(&mut self, capacity: Option<Resources>) -> bool {
        let changed = self.capacity != capacity;
        self.capacity = capacity;
        changed
    }

    /// The capacity, `None` while unknown.
    pub fn capacity(&self) -> Option<&Resources> {
        self.capacity.as_ref()
    }

    /// The sum of every held reservation.
    pub fn used(&self) -> &Resources {
        &self.used
    }

    /// What `uid` holds, if anything.
    pub fn held(&self, uid: &str) -> Option<&Resources> {
        self.reserved.get(uid)
    }

    /// The UIDs holding a reservation that `accounted` does not account for, in no order: what
    /// a sweep releases.
    pub fn unaccounted(&self, accounted: impl Fn(&str) -> bool) -> Vec<String> {
        self.reserved
            .keys()
            .filter(|uid| !accounted(uid))
            .cloned()
            .collect()
    }

    /// Number of held reservations.
    pub fn len(&self) -> usize {
        self.reserved.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reserved.is_empty()
    }

    /// Checks the complete `request` against capacity and reserves all of it, or nothing.
    ///
    /// Idempotent: a UID that already holds a reservation keeps it unchanged and `Ok` is
    /// returned (Run requests are immutable, so a second reserve is always the same request).
    pub fn try_reserve(&mut self, uid: &str, request: &Resources) -> Result<()> {
        if self.reserved.contains_key(uid) {
            return Ok(());
        }
        let capacity = self.capacity.as_ref().ok_or(Error::CapacityUnknown)?;
        let shortfalls: Vec<Shortfall> =
            Resources::shortfalls(request, &self.used, capacity).collect();
        if !shortfalls.is_empty() {
            return Err(Error::NoFit { shortfalls });
        }
        self.used.add(request);
        self.reserved.insert(uid.to_string(), request.clone());
        Ok(())
    }

    /// Holds `request` for `uid` whether or not it fits: a Run that already runs (one a
    /// restarted runtimed re-attaches to) uses its room whatever the capacity says now, and
    /// while it does nothing else is admitted into that room. Idempotent as
    /// [`Self::try_reserve`].
    pub fn hold(&mut self, uid: &str, request: &Resources) {
        if self.reserved.contains_key(uid) {
            return;
        }
        self.used.add(request);
        self.reserved.insert(uid.to_string(), request.clone());
    }

    /// Frees exactly what `uid` reserved and returns it; `None` (and no change) when `uid`
    /// holds nothing, so releasing twice is harmless.
    pub fn release(&mut self, uid: &str) -> Option<Resources> {
        let freed = self.reserved.remove(uid)?;
        self.used.sub(&freed);
        Some(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::RUNS;
    use proptest::prelude::*;

    const GPU: &str = "example.com/gpu";

    fn res(pairs: &[(&str, u64)]) -> Resources {
        pairs.iter().map(|&(k, v)| (k, v)).collect()
    }

    fn cache(capacity: &[(&str, u64)]) -> AdmissionCache {
        let mut c = AdmissionCache::new();
        c.set_capacity(Some(res(capacity)));
        c
    }

    #[test]
    fn unaccounted_reservations_are_those_nothing_accounts_for() {
        let mut c = cache(&[(RUNS, 3)]);
        for uid in ["running", "gone", "writing"] {
            c.try_reserve(uid, &res(&[(RUNS, 1)])).unwrap();
        }
        let accounted = ["running", "writing"];
        assert_eq!(c.unaccounted(|uid| accounted.contains(&uid)), ["gone"]);
        assert!(c.unaccounted(|_| true).is_empty());
    }

    #[test]
    fn nothing_is_reserved_while_capacity_is_unknown() {
        let mut c = AdmissionCache::new();
        assert_eq!(
            c.try_reserve("a", &res(&[(RUNS, 1)])),
            Err(Error::CapacityUnknown)
        );
        assert!(c.is_empty());
    }

    #[test]
    fn reserve_takes_the_complete_request_or_nothing() {
        let mut c = cache(&[(RUNS, 4), (GPU, 1)]);
        let gpu_run = res(&[(RUNS, 1), (GPU, 1)]);
        c.try_reserve("a", &gpu_run).unwrap();
        let err = c.try_reserve("b", &gpu_run).unwrap_err();
        assert_eq!(
            err,
            Error::NoFit {
                shortfalls: vec![Shortfall {
                    resource: GPU.into(),
                    requested: 1,
                    used: 1,
                    capacity: Some(1)
                }]
            }
        );
        assert_eq!(
            err.to_string(),
            "insufficient example.com/gpu: requested 1, 1 of 1 in use"
        );
        assert_eq!(
            c.used(),
            &gpu_run,
            "the refused request took no runs either"
        );
        assert_eq!(c.held("b"), None);
    }

    #[test]
    fn runs_zero_admits_no_run_not_even_one_asking_for_zero_runs() {
        let mut c = cache(&[(RUNS, 0), ("example.com/gpu", 1)]);
        for request in [res(&[(RUNS, 1)]), res(&[(RUNS, 0), ("example.com/gpu", 1)])] {
            let err = c.try_reserve("a", &request).unwrap_err();
            assert!(err.to_string().contains("insufficient runs"), "{err}");
        }
        assert!(c.is_empty());
    }

    #[test]
    fn a_resource_the_pod_does_not_advertise_never_fits() {
        let mut c = cache(&[(RUNS, 4)]);
        let err = c
            .try_reserve("a", &res(&[(RUNS, 1), ("example.com/tpu", 1)]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the Pod does not advertise example.com/tpu"
        );
        assert!(c.used().is_empty());
    }

    #[test]
    fn reserve_and_release_are_idempotent() {
        let mut c = cache(&[(RUNS, 2)]);
        c.try_reserve("a", &res(&[(RUNS, 1)])).unwrap();
        c.try_reserve("a", &res(&[(RUNS, 1)])).unwrap();
        assert_eq!(c.used().get(RUNS), 1);
        assert_eq!(c.release("a"), Some(res(&[(RUNS, 1)])));
        assert_eq!(c.release("a"), None);
        assert!(c.used().is_empty());
    }

    #[test]
    fn lowering_capacity_keeps_reservations_and_blocks_new_ones() {
        let mut c = cache(&[(RUNS, 2)]);
        c.try_reserve("a", &res(&[(RUNS, 1)])).unwrap();
        c.try_reserve("b", &res(&[(RUNS, 1)])).unwrap();
        assert!(c.set_capacity(Some(res(&[(RUNS, 1)]))));
        assert!(!c.set_capacity(Some(res(&[(RUNS, 1)]))));
        assert_eq!(c.len(), 2);
        c.release("a");
        assert!(
            c.try_reserve("c", &res(&[(RUNS, 1)])).is_err(),
            "b alone fills runs: 1"
        );
        c.release("b");
        c.try_reserve("c", &res(&[(RUNS, 1)])).unwrap();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reserve(u8, Resources),
        Release(u8),
        SetCapacity(Option<Resources>),
    }

    /// Requests never carry zero amounts ([`crate::api::resources::parse_requests`] drops
    /// them); capacities may advertise 0.
    fn resources(min: u64, max: u64) -> impl Strategy<Value = Resources> {
        proptest::collection::btree_map(
            prop_oneof![Just(RUNS), Just(GPU), Just("example.com/fpga")],
            min..=max,
            0..=3,
        )
        .prop_map(|m| m.into_iter().collect())
    }

    fn op(raise_only: bool) -> impl Strategy<Value = Op> {
        let cap = if raise_only {
            // The raise itself is drawn from `raises` by the property.
            Just(None).boxed()
        } else {
            proptest::option::weighted(0.9, resources(0, 6)).boxed()
        };
        prop_oneof![
            4 => (0u8..8, resources(1, 3)).prop_map(|(u, r)| Op::Reserve(u, r)),
            3 => (0u8..8).prop_map(Op::Release),
            1 => cap.prop_map(Op::SetCapacity),
        ]
    }

    fn sum_of_held(c: &AdmissionCache) -> Resources {
        let mut total = Resources::new();
        for held in c.reserved.values() {
            total.add(held);
        }
        total
    }

    proptest! {
        #[test]
        fn no_reserve_ever_overcommits_and_usage_is_the_sum_of_held_reservations(
            start in proptest::option::of(resources(0, 6)),
            ops in proptest::collection::vec(op(false), 0..64),
        ) {
            let mut c = AdmissionCache::new();
            c.set_capacity(start);
            for op in ops {
                match op {
                    Op::Reserve(u, request) => {
                        let uid = u.to_string();
                        let already = c.held(&uid).cloned();
                        let before = c.used().clone();
                        match c.try_reserve(&uid, &request) {
                            Ok(()) if already.is_some() => {
                                prop_assert_eq!(c.used(), &before, "a repeated reserve takes nothing");
                            }
                            Ok(()) => {
                                let cap = c.capacity().expect("reserved without a capacity");
                                for (name, _) in request.iter() {
                                    prop_assert!(cap.contains(name), "{} is not advertised", name);
                                    prop_assert!(c.used().get(name) <= cap.get(name),
                                        "{} overcommitted: {} > {}", name, c.used().get(name), cap.get(name));
                                }
                                let mut want = before.clone();
                                want.add(&request);
                                prop_assert_eq!(c.used(), &want);
                                prop_assert_eq!(c.held(&uid), Some(&request));
                            }
                            Err(_) => {
                                prop_assert_eq!(c.used(), &before, "a refused reserve takes nothing");
                                prop_assert_eq!(c.held(&uid), None);
                            }
                        }
                    }
                    Op::Release(u) => {
                        let uid = u.to_string();
                        let held = c.held(&uid).cloned();
                        let before = c.used().clone();
                        let freed = c.release(&uid);
                        prop_assert_eq!(&freed, &held, "release frees exactly what was reserved");
                        let mut want = before;
                        if let Some(freed) = &freed {
                            want.sub(freed);
                        }
                        prop_assert_eq!(c.used(), &want);
                    }
                    Op::SetCapacity(cap) => {
                        c.set_capacity(cap);
                    }
                }
                prop_assert_eq!(c.used(), &sum_of_held(&c));
            }
        }

        #[test]
        fn when_capacity_only_rises_usage_never_exceeds_it_for_any_resource(
            start in resources(0, 4),
            raises in proptest::collection::vec(resources(1, 2), 0..8),
            ops in proptest::collection::vec(op(true), 0..64),
        ) {
            let mut c = AdmissionCache::new();
            let mut cap = start;
            c.set_capacity(Some(cap.clone()));
            let mut raises = raises.into_iter();
            for op in ops {
                match op {
                    Op::Reserve(u, request) => { let _ = c.try_reserve(&u.to_string(), &request); }
                    Op::Release(u) => { c.release(&u.to_string()); }
                    Op::SetCapacity(_) => {
                        if let Some(more) = raises.next() {
                            cap.add(&more);
                            c.set_capacity(Some(cap.clone()));
                        }
                    }
                }
                for (name, amount) in c.used().iter() {
                    prop_assert!(cap.contains(name) && amount <= cap.get(name),
                        "{} overcommitted: {} of {}", name, amount, cap.get(name));
                }
                prop_assert_eq!(c.used(), &sum_of_held(&c));
            }
        }
    }
}
