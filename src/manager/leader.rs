//! Lease leader election for `scheduler run`: only the holder of the `kruntimes-scheduler`
//! Lease schedules.
//!
//! Owns acquiring, renewing and releasing the Lease, and the rule that a leader which loses
//! it, or cannot prove it still holds it, exits at once (like controller-runtime's managers),
//! so a new leader always starts alone and with an empty assumed cache. Each time it becomes
//! the leader it records its version on the Lease ([`ANNOTATION_SCHEDULER_VERSION`]), so
//! `status` and `explain` can say which release leads. It must not schedule or watch anything
//! else.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::SchedulerRunArgs;
use crate::kubeclient::Target;

/// Name of the leader-election Lease.
pub const LEADER_LEASE: &str = "kruntimes-scheduler";

/// The annotation on the leader-election Lease naming the release of the replica that last
/// became leader (`0.1.0 (abc1234)`); read by [`crate::cmd::replay::leader`].
pub const ANNOTATION_SCHEDULER_VERSION: &str = "kruntimes.io/scheduler-version";

/// The namespace of the leader-election Lease: `--leader-election-namespace`, else
/// `$POD_NAMESPACE`, else the context's namespace.
pub fn namespace(target: &Target, args: &SchedulerRunArgs) -> String {
    args.leader_election_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| target.namespace.clone())
}

/// A running election: sends `true` on `leading` once this replica holds the Lease.
pub struct Election {
    task: JoinHandle<()>,
    manager: Arc<LeaseManager>,
}

impl Election {
    /// Starts competing for the Lease.
    pub async fn start(
        target: &Target,
        args: &SchedulerRunArgs,
        leading: watch::Sender<bool>,
    ) -> anyhow::Result<Self> {
        let namespace = namespace(target, args);
        let identity = args
            .leader_election_identity
            .clone()
            .unwrap_or_else(default_identity);
        let duration = args.leader_election_lease_duration.as_secs().max(3);
        let grace = (duration / 3).max(1);
        // The lease is renewed `grace` before it expires. A renewal that hangs longer than
        // that must fail (and stop us) before the Lease lapses, not after: so leader election
        // gets its own client whose requests time out within `grace`.
        let mut config = target.config.clone();
        let timeout = Some(Duration::from_secs(grace));
        (
            config.connect_timeout,
            config.read_timeout,
            config.write_timeout,
        ) = (timeout, timeout, timeout);
        let client = crate::kubeclient::client_for(config)
            .context("cannot build the leader-election client")?;
        let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
        let manager = LeaseManagerBuilder::new(client, LEADER_LEASE)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .with_duration(duration)
            .with_grace(grace)
            .build()
            .await
            .map_err(|e| {
                anyhow!(
                    "cannot set up leader election on Lease {namespace}/{LEADER_LEASE} in {}: {e}",
                    target.describe()
                )
            })?;
        info!(%identity, lease = %format!("{namespace}/{LEADER_LEASE}"), "waiting for leadership");
        let manager = Arc::new(manager);
        let task = tokio::spawn(keep(manager.clone(), leases, leading));
        Ok(Election { task, manager })
    }

    /// Hands the Lease over at once instead of letting it expire.
    pub async fn release(self) {
        self.task.abort();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.manager.release()).await;
    }
}

/// Renews the Lease for as long as it runs; exits the process when leadership is lost.
async fn keep(manager: Arc<LeaseManager>, leases: Api<Lease>, leading: watch::Sender<bool>) {
    let mut leader = false;
    loop {
        // `changed` must keep running: it is what renews the lease while we hold it.
        match manager.changed().await {
            Ok(true) if !leader => {
                leader = true;
                let _ = leading.send(true);
                // Apart, so that a slow write never delays a renewal.
                tokio::spawn(record_version(leases.clone()));
            }
            Ok(false) if leader => {
                // Another replica may schedule now: stop at once, nothing in flight.
                error!("lost the leader-election lease; exiting so scheduling stops at once");
                std::process::exit(1);
            }
            Ok(_) => {}
            Err(e) if leader => {
                // A failed renewal may already have let the Lease lapse: we can no longer
                // prove we lead, so stop before another replica starts.
                error!(
                    "renewing the leader-election lease failed: {e}; exiting so scheduling stops at once"
                );
                std::process::exit(1);
            }
            Err(e) => {
                warn!("leader election: {e}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Records this binary's release on the Lease, once per leadership. Informational only: a
/// failure is logged and leadership goes on (an older RBAC may lack `patch` on Leases).
async fn record_version(leases: Api<Lease>) {
    let patch = version_patch(&crate::api::build::info());
    // A merge patch of one annotation: it leaves the election's fields (spec) to their owner.
    if let Err(e) = leases
        .patch(LEADER_LEASE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        warn!(
            "cannot record this scheduler's version on the leader-election Lease {LEADER_LEASE}: {e}; `status` and `explain` will not show it"
        );
    }
}

/// `0.1.0 (abc1234)`: the release and the short commit it was built from, when known.
pub fn version_text(info: &crate::api::build::Info) -> String {
    match info.git_commit {
        "" | "unknown" => info.version.to_string(),
        commit => format!("{} ({})", info.version, commit.get(..7).unwrap_or(commit)),
    }
}

/// The merge patch that sets [`ANNOTATION_SCHEDULER_VERSION`].
fn version_patch(info: &crate::api::build::Info) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {ANNOTATION_SCHEDULER_VERSION: version_text(info)}}
    })
}

fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kruntimes-scheduler".into());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_release_and_the_short_commit() {
        let mut info = crate::api::build::info();
        info.version = "0.1.0";
        info.git_commit = "abc1234def5678";
        assert_eq!(version_text(&info), "0.1.0 (abc1234)");
        assert_eq!(
            version_patch(&info),
            serde_json::json!({"metadata": {"annotations": {
                "kruntimes.io/scheduler-version": "0.1.0 (abc1234)"
            }}})
        );
        info.git_commit = "unknown";
        assert_eq!(version_text(&info), "0.1.0");
    }
}
