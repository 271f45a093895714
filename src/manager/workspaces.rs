//! The PersistentWorkspace lifecycle controller, as kube-controller-manager's volume controllers
//! run beside kube-scheduler: it carries out what [`crate::scheduler::workspaces`] decides from
//! the scheduler's cache (mark a workspace Lost when its Runtime Pod is, record its last use,
//! release and delete it after `ttlSecondsAfterUnused`, bind what another writer placed), each
//! write guarded by the observed resourceVersion. It decides nothing and must not place, bind
//! or heal a Run; the binding a Run's Bind waits for is the scheduler's
//! (`scheduler::controller::binding`).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use tracing::{info, warn};

use crate::api::{PersistentWorkspace, patch_params};
use crate::scheduler::framework::SharedCache;
use crate::scheduler::workspaces::{self, Due, Step};

/// How often the controller looks at the workspaces at the least.
const WORKSPACE_PERIOD: Duration = Duration::from_secs(1);

/// The workspace lifecycle controller: its writes are the leader's.
pub struct WorkspaceLifecycle {
    client: kube::Client,
    /// The scheduler's cache, which decides what is due.
    cache: Arc<SharedCache>,
    /// The scheduler's store of PersistentWorkspaces: the versions the writes are guarded by.
    store: Store<PersistentWorkspace>,
}

impl WorkspaceLifecycle {
    pub fn new(
        client: kube::Client,
        cache: Arc<SharedCache>,
        store: Store<PersistentWorkspace>,
    ) -> Arc<Self> {
        Arc::new(WorkspaceLifecycle {
            client,
            cache,
            store,
        })
    }

    /// Runs a pass at least every [`WORKSPACE_PERIOD`] and at the next TTL deadline, until
    /// the task is dropped. The caller starts it once the scheduler's caches have listed.
    pub async fn run(self: Arc<Self>) {
        loop {
            let now = jiff::Timestamp::now();
            let (steps, next) = workspaces::due(&self.cache.lock(), now);
            for due in steps {
                self.carry_out(&due).await;
            }
            let wait = next
                .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                .map_or(WORKSPACE_PERIOD, |d| d.min(WORKSPACE_PERIOD));
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }

    /// Writes one step on the version the store has. A conflict or a missing object is left
    /// to the next pass, which sees the newer version.
    async fn carry_out(&self, due: &Due) {
        let key = ObjectRef::new(&due.name).within(&due.namespace);
        let Some(workspace) = self.store.get(&key) else {
            return;
        };
        if workspace.uid().as_deref() != Some(due.uid.as_str()) {
            return;
        }
        // Written on the version the step was decided on: a newer one (say, the Touch of a
        // use that just ended) makes the write conflict, and the next pass decides again.
        let api: Api<PersistentWorkspace> = Api::namespaced(self.client.clone(), &due.namespace);
        let now = jiff::Timestamp::now();
        if let Some(status) = workspaces::apply(&workspace, &due.step, now) {
            let body = json!({
                "metadata": {"resourceVersion": due.resource_version},
                "status": status,
            });
            match api
                .patch_status(&due.name, &patch_params(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => log_step(due),
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => return,
                Err(e) => {
                    warn!(workspace = %due.name, namespace = %due.namespace, "cannot write the PersistentWorkspace status: {e}; retrying");
                    return;
                }
            }
        }
        if let Step::Release { delete: true } = due.step {
            match api
                .delete(&due.name, &crate::kubeclient::delete_uid(&due.uid))
                .await
            {
                Ok(_) => {
                    info!(workspace = %due.name, namespace = %due.namespace, "deleted after ttlSecondsAfterUnused (cleanupPolicy DeleteAfterTTL)")
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    warn!(workspace = %due.name, namespace = %due.namespace, "cannot delete the released PersistentWorkspace: {e}; retrying");
                }
            }
        }
    }
}

fn log_step(due: &Due) {
    let (name, namespace) = (&due.name, &due.namespace);
    match &due.step {
        Step::Bind { pod } => {
            info!(workspace = %name, %namespace, %pod, "PersistentWorkspace bound")
        }
        Step::Lose { pod, why } => {
            warn!(workspace = %name, %namespace, %pod, "PersistentWorkspace lost: its Runtime Pod is {why:?}")
        }
        Step::Touch { .. } => {}
        Step::Release { .. } => {
            info!(workspace = %name, %namespace, "PersistentWorkspace released after ttlSecondsAfterUnused")
        }
    }
}
