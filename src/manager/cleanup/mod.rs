//! What becomes of a Run at its end, beside the scheduler and under its Lease, as Kubernetes'
//! TTL-after-finished controller runs in kube-controller-manager beside kube-scheduler:
//! terminal Runs are deleted once `ttlSecondsAfterFinished` has passed since their
//! `completionTime` ([`ttl`] decides which), each delete guarded by the Run's UID so that a Run
//! recreated under the same name is never deleted for its predecessor's TTL; and function Runs
//! carry the function-cleanup finalizer while they may hold a registration ([`finalizer`]
//! decides), each write guarded by the Run's resourceVersion.
//!
//! It reads the scheduler's own Run store (one copy of every Run in the process) and must not
//! place, bind or heal a Run.

pub mod finalizer;
pub mod ttl;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use tracing::{info, warn};

use crate::api::Run;

/// The longest the loop sleeps: a Run that finishes with a TTL, or a function Run that needs
/// its finalizer, is seen within this.
const TTL_PERIOD: Duration = Duration::from_millis(500);

/// The cleanup controller: its writes are the leader's.
pub struct Cleanup {
    client: kube::Client,
}

impl Cleanup {
    pub fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Cleanup { client })
    }

    /// Passes over `store` until the task is dropped: at least every [`TTL_PERIOD`] and at the
    /// next TTL deadline.
    ///
    /// It does not await the store's first list: the store shows nothing until that list is
    /// complete, so a pass before it does nothing. And it must not: the scheduler awaits that
    /// readiness, and kube-runtime wakes only one waiter of a store's readiness (its
    /// `DelayedInit` polls one oneshot receiver, which keeps the last waker only), so a second
    /// waiter could leave the scheduling loop asleep for good.
    pub async fn run(self: Arc<Self>, store: Store<Run>) {
        loop {
            let runs = store.state();
            for run in &runs {
                if let Some(step) = finalizer::step(run) {
                    self.write_finalizers(run, step).await;
                }
            }
            let (due, next) = ttl::expired(runs.iter().map(|r| r.as_ref()), jiff::Timestamp::now());
            for run in due {
                let api: Api<Run> = Api::namespaced(self.client.clone(), &run.namespace);
                match api
                    .delete(&run.name, &crate::kubeclient::delete_uid(&run.uid))
                    .await
                {
                    Ok(_) => {
                        info!(run = %run.name, namespace = %run.namespace, "deleted: ttlSecondsAfterFinished passed")
                    }
                    // Gone already, or another Run of that name now.
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                    Err(e) => {
                        warn!(run = %run.name, namespace = %run.namespace, "cannot delete a Run past its ttlSecondsAfterFinished: {e}; retrying")
                    }
                }
            }
            let pause = next.map_or(TTL_PERIOD, |n| n.min(TTL_PERIOD));
            tokio::time::sleep(pause.max(Duration::from_millis(50))).await;
        }
    }

    /// Adds or removes the function-cleanup finalizer on the version the store has; a
    /// conflict is retried at the next pass with the newer version.
    async fn write_finalizers(&self, run: &Run, step: finalizer::FinalizerStep) {
        let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": run.resource_version(),
                "finalizers": finalizer::finalizers_after(run, step),
            }
        });
        let api: Api<Run> = Api::namespaced(self.client.clone(), &namespace);
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => {
                warn!(run = %name, namespace = %namespace, "cannot write the {} finalizer ({step:?}): {e}; retrying", finalizer::FUNCTION_CLEANUP)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    /// Why [`super::Cleanup::run`] does not await the store's readiness: kube-runtime wakes
    /// only the last task that began to wait for it. Should kube-runtime wake them all one day,
    /// this fails, and the wait may come back.
    #[tokio::test(flavor = "current_thread")]
    async fn a_stores_readiness_wakes_only_its_last_waiter() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let wait = |store: reflector::Store<ConfigMap>| async move {
            let _ = store.wait_until_ready().await;
        };
        let first = tokio::spawn(wait(store.clone()));
        tokio::task::yield_now().await;
        let second = tokio::spawn(wait(store.clone()));
        tokio::task::yield_now().await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(second.is_finished(), "the last waiter is woken");
        assert!(!first.is_finished(), "the first one sleeps on");
        first.abort();
        // A waiter that comes after the list is ready at once.
        store.wait_until_ready().await.unwrap();
    }
}
