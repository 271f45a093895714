//! Lease leader election for `scheduler run`: only the holder of the `kruntimes-scheduler`
//! Lease schedules.
//!
//! Owns acquiring, renewing and releasing the Lease, and the rule that a leader which loses
//! it, or cannot prove it still holds it, exits at once (like controller-runtime's managers),
//! so a new leader always starts alone and with an empty assumed cache. It must not schedule
//! or watch anything else.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::cli::SchedulerRunArgs;
use crate::kubeclient::Target;

/// Name of the leader-election Lease.
pub const LEADER_LEASE: &str = "kruntimes-scheduler";

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
        let task = tokio::spawn(keep(manager.clone(), leading));
        Ok(Election { task, manager })
    }

    /// Hands the Lease over at once instead of letting it expire.
    pub async fn release(self) {
        self.task.abort();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.manager.release()).await;
    }
}

/// Renews the Lease for as long as it runs; exits the process when leadership is lost.
async fn keep(manager: Arc<LeaseManager>, leading: watch::Sender<bool>) {
    let mut leader = false;
    loop {
        // `changed` must keep running: it is what renews the lease while we hold it.
        match manager.changed().await {
            Ok(true) if !leader => {
                leader = true;
                let _ = leading.send(true);
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

fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kruntimes-scheduler".into());
    format!("{host}-{}", std::process::id())
}
