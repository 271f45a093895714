//! Nominations: a Runtime Pod being drained for a starved Pending Run.
//!
//! Owns the scheduler-local record of which Pending Run holds which Pod's nomination, with the
//! rule that makes it a bounded wait: every Run later in the queue sees the nominated request
//! as used on that Pod, so capacity freed there accumulates for the nominated Run (kube-
//! scheduler's `nominatedNodeName`, counted against equal-or-lower Pods). At most one
//! nomination per Pod and per Run. It must not choose the Pod or decide when a Run is starved
//! (that is the cache's nominator) and must not read a clock.
//!
//! The record is rebuilt from `status.nominatedPodName` by a new leader; the cache adopts a
//! Run's recorded nomination when it sees the Run in the queue.

use std::collections::HashMap;
use std::sync::Arc;

use super::facts::RunFacts;
use super::types::{Held, QueueOrder, RunKey};
use crate::api::Resources;

/// One Pod nominated for one Pending Run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    /// The nominated Run's facts (its request is valid: only such a Run is nominated).
    pub facts: Arc<RunFacts>,
    pub pod: String,
    /// The nominated Run's place in its queue: only Runs after it leave room for it.
    pub order: QueueOrder,
    /// The room held on the Pod, by resource id: the Run's request resolved when it was
    /// nominated.
    pub held: Held,
}

impl Nomination {
    /// The room held on the Pod, by name: the Run's complete request.
    pub fn request(&self) -> &Resources {
        &self.facts.counted.amounts
    }
}

/// Every nomination, by Run and by Pod.
#[derive(Debug, Clone, Default)]
pub struct Nominations {
    by_run: HashMap<RunKey, Nomination>,
    /// (namespace, Pod name) -> the Run nominated there.
    by_pod: HashMap<(String, String), RunKey>,
}

impl Nominations {
    pub fn get(&self, key: &RunKey) -> Option<&Nomination> {
        self.by_run.get(key)
    }

    /// The nomination on `pod`, with its Run's key.
    pub fn on_pod(&self, namespace: &str, pod: &str) -> Option<(&RunKey, &Nomination)> {
        let key = self.by_pod.get(&(namespace.to_string(), pod.to_string()))?;
        Some((key, &self.by_run[key]))
    }

    /// Records `nomination` for `key`; refused (false) when the Run already has one or the Pod
    /// is nominated for another Run.
    pub fn nominate(&mut self, key: &RunKey, nomination: Nomination) -> bool {
        let pod = (key.namespace.clone(), nomination.pod.clone());
        if self.by_run.contains_key(key) || self.by_pod.contains_key(&pod) {
            return false;
        }
        self.by_pod.insert(pod, key.clone());
        self.by_run.insert(key.clone(), nomination);
        true
    }

    /// Drops the Run's nomination, returning it.
    pub fn drop_run(&mut self, key: &RunKey) -> Option<Nomination> {
        let nomination = self.by_run.remove(key)?;
        self.by_pod
            .remove(&(key.namespace.clone(), nomination.pod.clone()));
        Some(nomination)
    }

    /// The nominations of one (namespace, runtime), with their Runs' keys.
    pub fn in_scope<'a>(
        &'a self,
        namespace: &'a str,
        runtime: &'a str,
    ) -> impl Iterator<Item = (&'a RunKey, &'a Nomination)> + 'a {
        self.by_run
            .iter()
            .filter(move |(k, n)| k.namespace == namespace && n.facts.scope.runtime == runtime)
    }

    /// The nominations of one namespace, with their Runs' keys.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a RunKey, &'a Nomination)> + 'a {
        self.by_run
            .iter()
            .filter(move |(k, _)| k.namespace == namespace)
    }

    pub fn len(&self) -> usize {
        self.by_run.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_run.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nomination(run: &str, pod: &str) -> Nomination {
        Nomination {
            facts: Arc::new(RunFacts::of(
                &crate::testing::run(run).runtime("rt").build(),
            )),
            pod: pod.into(),
            held: Held::default(),
            order: QueueOrder {
                priority: 0,
                created: None,
                uid: format!("uid-{run}"),
            },
        }
    }

    #[test]
    fn at_most_one_nomination_per_pod_and_per_run() {
        let mut n = Nominations::default();
        let (a, b) = (RunKey::new("ns", "uid-a"), RunKey::new("ns", "uid-b"));
        assert!(n.nominate(&a, nomination("a", "p1")));
        assert!(!n.nominate(&b, nomination("b", "p1")), "p1 is taken");
        assert!(!n.nominate(&a, nomination("a", "p2")), "a already has one");
        assert!(n.nominate(&b, nomination("b", "p2")));
        assert_eq!(n.on_pod("ns", "p1").map(|(k, _)| k), Some(&a));
        assert_eq!(n.drop_run(&a).map(|n| n.pod), Some("p1".to_string()));
        assert!(n.on_pod("ns", "p1").is_none());
        assert!(!n.nominate(&b, nomination("b", "p1")), "b already has p2");
        assert_eq!(n.len(), 1);
    }
}
