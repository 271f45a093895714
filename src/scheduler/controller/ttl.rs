//! The leader's TTL loop: deletes terminal Runs once `ttlSecondsAfterFinished` has passed since
//! their `completionTime` (which Runs are due is [`crate::scheduler::ttl`]'s pure decision).
//! Each delete is guarded by the Run's UID, so a Run recreated under the same name is never
//! deleted for its predecessor's TTL.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::Store;
use tracing::{info, warn};

use super::Scheduler;
use crate::api::Run;
use crate::scheduler::ttl;

/// The longest the loop sleeps: a Run that finishes with a TTL is seen within this.
const TTL_PERIOD: Duration = Duration::from_secs(1);

impl Scheduler {
    pub(super) async fn expire_finished(self: Arc<Self>, store: Store<Run>) {
        loop {
            let runs = store.state();
            let (due, next) = ttl::expired(runs.iter().map(|r| r.as_ref()), jiff::Timestamp::now());
            for run in due {
                let api: Api<Run> = Api::namespaced(self.client.clone(), &run.namespace);
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(run.uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&run.name, &params).await {
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
}
