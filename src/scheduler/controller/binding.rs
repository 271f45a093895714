//! The binding of an unbound PersistentWorkspace, written (guarded by the observed
//! resourceVersion) before the Bind of the first Run that uses it, as kube-scheduler's
//! VolumeBinding plugin binds a claim in PreBind: no Run of a workspace can run, let alone
//! finish, before its binding is durable and a new leader reads it. What
//! [`crate::scheduler::workspaces`] decides for a workspace afterwards (Lost, last use,
//! release, delete) is the manager's workspace lifecycle controller's
//! ([`crate::manager::workspaces`]).

use std::collections::HashSet;

use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::json;
use tracing::info;

use super::Scheduler;
use crate::api::{PersistentWorkspace, WorkspacePhase, patch_params};
use crate::scheduler::workspaces::{self, Step};

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

impl Scheduler {
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

    /// Forgets the bindings written for workspaces that are gone: at each delete the watch
    /// brings, and after each complete (re)list, all but the listed ones.
    pub(super) fn forget_bindings(
        &self,
        event: &watcher::Result<watcher::Event<PersistentWorkspace>>,
        store: &Store<PersistentWorkspace>,
    ) {
        let mut bindings = self.bindings.lock().unwrap();
        match event {
            Ok(watcher::Event::Delete(workspace)) => {
                if let Some(uid) = workspace.uid() {
                    bindings.remove(&uid);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let live: HashSet<String> = store.state().iter().filter_map(|w| w.uid()).collect();
                bindings.retain(|uid, _| live.contains(uid));
            }
            _ => {}
        }
    }
}
