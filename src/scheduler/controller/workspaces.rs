//! The leader's PersistentWorkspace writes, all guarded by the observed resourceVersion:
//! the binding of an unbound workspace, written before the Bind of the first Run that uses
//! it (so no Run of a workspace can run, let alone finish, before its binding is durable and
//! a new leader reads it), and the lifecycle loop carrying out what
//! [`crate::scheduler::workspaces`] decides (mark a workspace Lost, record its last use,
//! release and delete it after its TTL, and bind what another writer placed). It decides
//! nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use tracing::{info, warn};

use super::Scheduler;
use crate::api::{PersistentWorkspace, WorkspacePhase, patch_params};
use crate::scheduler::workspaces::{self, Due, Step};

/// What [`Scheduler::persist_binding`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Binding {
    /// The workspace is Bound to the Pod in its status (written now or before).
    Written,
    /// It is bound elsewhere, gone, or changed under the write: the watch brings the news.
    Changed,
    /// The write failed.
    Failed(String),
}

impl Binding {
    fn on(here: bool) -> Self {
        if here {
            Binding::Written
        } else {
            Binding::Changed
        }
    }
}

/// How often the loop looks at the workspaces at the least.
const WORKSPACE_PERIOD: Duration = Duration::from_secs(1);

impl Scheduler {
    /// Runs a lifecycle pass at least every [`WORKSPACE_PERIOD`] and at the next TTL
    /// deadline. (Bindings are written before a Run's Bind, by `persist_binding`; a pass
    /// binds only what another writer placed.)
    pub(super) async fn tend_workspaces(self: Arc<Self>) {
        let store = self.workspace_store.clone();
        loop {
            let now = jiff::Timestamp::now();
            let (steps, next) = self.cache.with(|cache| workspaces::due(cache, now));
            // Forget bindings written for workspaces that are gone.
            let live: HashSet<String> = store.state().iter().filter_map(|w| w.uid()).collect();
            self.bindings
                .lock()
                .unwrap()
                .retain(|uid, _| live.contains(uid));
            for due in steps {
                self.carry_out_workspace(&store, &due).await;
            }
            let wait = next
                .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                .map_or(WORKSPACE_PERIOD, |d| d.min(WORKSPACE_PERIOD));
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }

    /// Writes one step on the version the store has; returns whether it was written. A
    /// conflict or a missing object is left to the next pass, which sees the newer version.
    async fn carry_out_workspace(&self, store: &Store<PersistentWorkspace>, due: &Due) -> bool {
        let key = ObjectRef::new(&due.name).within(&due.namespace);
        let Some(workspace) = store.get(&key) else {
            return false;
        };
        if workspace.uid().as_deref() != Some(due.uid.as_str()) {
            return false;
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
                Ok(_) => self.log_workspace_step(due),
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => return false,
                Err(e) => {
                    warn!(workspace = %due.name, namespace = %due.namespace, "cannot write the PersistentWorkspace status: {e}; retrying");
                    return false;
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
                    return false;
                }
            }
        }
        true
    }

    /// Makes sure the workspace `name` is Bound to `pod` in its status before a Run that
    /// uses it is bound there: writes the binding when the status has none. The Run may be
    /// bound only on [`Binding::Written`]; otherwise its reservation is released and it
    /// looks again (at once when the watch is bringing news, with backoff after an error).
    pub(super) async fn persist_binding(&self, namespace: &str, name: &str, pod: &str) -> Binding {
        let key = ObjectRef::new(name).within(namespace);
        let Some(workspace) = self.workspace_store.get(&key) else {
            return Binding::Changed;
        };
        let uid = workspace.uid().unwrap_or_default();
        // One writer per workspace: a burst on an unbound workspace writes its binding once,
        // and workspaces do not wait for each other.
        let slot = self
            .bindings
            .lock()
            .unwrap()
            .entry(uid.clone())
            .or_default()
            .clone();
        let mut written = slot.lock().await;
        if let Some(bound) = written.as_deref() {
            return Binding::on(bound == pod);
        }
        let api: Api<PersistentWorkspace> = Api::namespaced(self.client.clone(), namespace);
        let mut current = workspace.as_ref().clone();
        // The store may lag a write of ours or another's: a conflict reads the object again.
        for _ in 0..3 {
            if let Some(bound) = current.bound_pod() {
                *written = Some(bound.to_string());
                return Binding::on(bound == pod);
            }
            // Lost, Released and deleting workspaces are never bound (again).
            if current.phase() != WorkspacePhase::Pending
                || current.metadata.deletion_timestamp.is_some()
            {
                return Binding::Changed;
            }
            let step = Step::Bind {
                pod: pod.to_string(),
            };
            let Some(status) = workspaces::apply(&current, &step, jiff::Timestamp::now()) else {
                return Binding::Changed;
            };
            let body = json!({
                "metadata": {"resourceVersion": current.resource_version()},
                "status": status,
            });
            match api
                .patch_status(name, &patch_params(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => {
                    info!(workspace = %name, %namespace, %pod, "PersistentWorkspace bound");
                    *written = Some(pod.to_string());
                    return Binding::Written;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(name).await {
                    Ok(Some(fresh)) if fresh.uid().as_deref() == Some(uid.as_str()) => {
                        current = fresh
                    }
                    Ok(_) => return Binding::Changed,
                    Err(e) => return Binding::Failed(e.to_string()),
                },
                Err(e) => return Binding::Failed(e.to_string()),
            }
        }
        Binding::Changed
    }

    fn log_workspace_step(&self, due: &Due) {
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
}
