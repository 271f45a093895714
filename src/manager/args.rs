//! `scheduler run`'s flags: the manager's own options, defined here so that the manager never
//! imports the CLI (the `scheduler` command group names them). Definitions only.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::util::duration::parse_duration;

#[derive(Debug, Clone, Args)]
pub struct SchedulerRunArgs {
    /// Pending and Failed status writes in flight (cycles are serial, one pop of the queue at a
    /// time; Binds have 64 slots of their own).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, value_name = "NAME")]
    pub watch_namespace: Option<String>,
    /// Elect a leader on a Lease so only one replica schedules.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease `kruntimes-scheduler` (default: $POD_NAMESPACE,
    /// then the context's namespace).
    #[arg(long, value_name = "NAME")]
    pub leader_election_namespace: Option<String>,
    /// Identity in the leader-election Lease (default: Pod or host name plus process id).
    #[arg(long, value_name = "ID")]
    pub leader_election_identity: Option<String>,
    /// How long a leader's Lease is valid without renewal; a standby takes over after it.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// Address of the /metrics endpoint (`0` disables it).
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Serve /metrics over TLS, only to callers whose bearer token the API server accepts and
    /// authorises to get /metrics (TokenReview and SubjectAccessReview, as controller-runtime's
    /// secure metrics); `false` serves plain HTTP to anyone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub metrics_secure: bool,
    /// Directory holding tls.crt and tls.key for /metrics (a mounted Secret, from cert-manager
    /// say); without it a self-signed certificate is made at start.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Address of /healthz and /readyz (`0` disables them).
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Address of the gateway, the aggregated API of Runs' subresources
    /// (subresources.kruntimes.io: runs/log, runs/invoke, runs/artifacts) through which
    /// kubectl kruntimes logs, invoke and artifacts reach runtimed; served over TLS to the API
    /// server's front proxy by every replica; `0` disables it.
    #[arg(long, default_value = "0", value_name = "ADDR")]
    pub gateway_bind_address: String,
    /// Directory holding the gateway's tls.crt and tls.key (cert-manager's, whose CA injector
    /// fills the APIService's caBundle); without it the gateway keeps a CA and a certificate
    /// in Secret kubectl-kruntimes-gateway-tls of its namespace, renews them, and writes the
    /// CA to the APIService.
    #[arg(long, value_name = "DIR")]
    pub gateway_cert_dir: Option<PathBuf>,
    /// The ServiceAccount whose tokens the gateway presents to runtimed (default: the one the
    /// scheduler runs as).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub gateway_service_account: Option<String>,
    /// How long a Runtime Pod's runtimed heartbeat may be stale (or its Lease missing) before
    /// the Runs running there are failed with reason RuntimePodLost, as on a lost node.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub pod_lost_grace: Duration,
    /// How long the oldest Pending Run of a Runtime that does not fit may wait while later
    /// Runs are placed before the scheduler nominates a Runtime Pod for it
    /// (status.nominatedPodName) and leaves room there for it.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub starvation_threshold: Duration,
    /// How many fairness groups (those with the most Pending Runs) get series in
    /// kruntimes_scheduler_fair_share and kruntimes_scheduler_fair_share_pending_runs; 0: none.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub fair_share_metrics_groups: usize,
    /// The kruntimes image whose binary the Runtime controller copies into every Runtime Pod
    /// (an init container); deploy/ sets it to the image the scheduler runs from.
    #[arg(long, env = "KRUNTIMES_IMAGE", value_name = "IMAGE", default_value = crate::runtime::pod::DEFAULT_IMAGE)]
    pub runtime_image: String,
    /// Requests of the containers kruntimes adds to Runtime Pods (the init container and the
    /// runtimed sidecar), as `kubectl set resources` takes them; `""`: none.
    #[arg(long, value_name = "LIST", default_value = crate::runtime::pod::DEFAULT_REQUESTS, value_parser = crate::runtime::pod::parse_resource_list)]
    pub runtimed_requests:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Publish the Events of a Run's ordinary life too (Scheduled, Admitted, Started,
    /// Completed, RunSucceeded): off by default, one API write per Run saved, as the Go project
    /// writes none; every other Event (every Warning) is always published. Runtime Pods'
    /// runtimed gets the same setting.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub routine_events: bool,
    /// How long a routine Event waits for the Run's next one to take it in (`Scheduled` is
    /// published only for a Run not started by then; runtimed's `Started` joins a short task's
    /// end); `0s`: each is published at once. Runtime Pods' runtimed gets the same setting.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub event_fold_window: Duration,
    /// How long runtimed in Runtime Pods holds a started task's claim (its `--claim-delay`):
    /// a task that ends within it costs one status write, not two. An unclaimed Run bound less
    /// than this plus 2 s ago is taken for possibly started: not sent back from a terminating
    /// Pod nor preempted as unstarted until then. `0s`: claims are written before tasks start.
    #[arg(long, default_value = crate::api::DEFAULT_CLAIM_DELAY, value_parser = parse_duration, value_name = "DURATION")]
    pub claim_delay: Duration,
    /// Their limits (a compute ResourceQuota requires both); `""`: none.
    #[arg(long, value_name = "LIST", default_value = crate::runtime::pod::DEFAULT_LIMITS, value_parser = crate::runtime::pod::parse_resource_list)]
    pub runtimed_limits:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}
