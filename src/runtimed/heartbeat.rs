//! The runtimed heartbeat: a `coordination.k8s.io/v1` Lease named after the Runtime Pod, in
//! its namespace, labelled `kruntimes.io/runtime-pod: <pod>`, owned by the Pod and held by the
//! Pod's UID, renewed on an interval and deleted on shutdown.
//!
//! The scheduler reads this Lease to decide whether the Pod's agent is alive. This module only
//! writes the one Lease; a failed renewal is logged and retried, never fatal.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::Identity;
use crate::api::{FIELD_MANAGER, LABEL_RUNTIME_POD};

/// How often the Lease is renewed and for how long each renewal holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub interval: Duration,
    pub duration: Duration,
}

/// Retry delay after a failed renewal, capped by the interval.
const RETRY: Duration = Duration::from_secs(2);

/// The Lease as runtimed wants it: named after the Pod, owned by it, held by its UID.
/// `leaseDurationSeconds` is the duration rounded up to whole seconds (at least 1).
pub fn desired_lease(
    me: &Identity,
    config: &Config,
    acquired: &MicroTime,
    now: &MicroTime,
) -> Lease {
    let seconds = config.duration.as_secs() + u64::from(config.duration.subsec_nanos() > 0);
    Lease {
        metadata: ObjectMeta {
            name: Some(me.pod_name.clone()),
            namespace: Some(me.namespace.clone()),
            // The scheduler watches heartbeat Leases by this label, not every Lease.
            labels: Some([(LABEL_RUNTIME_POD.to_string(), me.pod_name.clone())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: me.pod_name.clone(),
                uid: me.pod_uid.clone(),
                controller: None,
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.pod_uid.clone()),
            lease_duration_seconds: Some(i32::try_from(seconds.max(1)).unwrap_or(i32::MAX)),
            acquire_time: Some(acquired.clone()),
            renew_time: Some(now.clone()),
            ..Default::default()
        }),
    }
}

/// A running heartbeat; [`LeaseRenewer::stop`] ends it and deletes the Lease.
pub struct LeaseRenewer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl LeaseRenewer {
    /// Starts renewing at once, then every `config.interval`.
    pub fn start(api: Api<Lease>, me: Identity, config: Config) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(renew_until_stopped(api, me, config, stopped));
        LeaseRenewer { stop, task }
    }

    /// Stops renewing and deletes the Lease (failures are logged).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::warn!("the heartbeat task ended abnormally: {e}");
        }
    }
}

async fn renew_until_stopped(
    api: Api<Lease>,
    me: Identity,
    config: Config,
    mut stopped: oneshot::Receiver<()>,
) {
    let acquired = MicroTime(jiff::Timestamp::now());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut healthy = true;
    loop {
        let lease = desired_lease(&me, &config, &acquired, &MicroTime(jiff::Timestamp::now()));
        let next = match api
            .patch(&me.pod_name, &params, &Patch::Apply(&lease))
            .await
        {
            Ok(_) => {
                if !healthy {
                    tracing::info!(lease = %me.pod_name, "heartbeat renewed again");
                }
                healthy = true;
                config.interval
            }
            Err(e) => {
                tracing::warn!(lease = %me.pod_name, "cannot renew the heartbeat Lease {}/{}: {e}; retrying", me.namespace, me.pod_name);
                healthy = false;
                config.interval.min(RETRY)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = &mut stopped => break,
        }
    }
    match api.delete(&me.pod_name, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(lease = %me.pod_name, "heartbeat Lease deleted"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => tracing::warn!(
            lease = %me.pod_name,
            "cannot delete the heartbeat Lease {}/{}: {e}; it expires on its own",
            me.namespace,
            me.pod_name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_named_after_owned_by_and_held_by_the_pod() {
        let me = Identity {
            pod_name: "python-7xk2p".into(),
            namespace: "team-a".into(),
            pod_uid: "uid-1".into(),
        };
        let t = MicroTime(jiff::Timestamp::from_second(100).unwrap());
        let config = Config {
            interval: Duration::from_secs(10),
            duration: Duration::from_millis(40_500),
        };
        let lease = desired_lease(&me, &config, &t, &t);
        assert_eq!(lease.metadata.name.as_deref(), Some("python-7xk2p"));
        assert_eq!(lease.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            lease.metadata.labels.as_ref().unwrap()[LABEL_RUNTIME_POD],
            "python-7xk2p",
            "the scheduler selects heartbeat Leases by this label"
        );
        let owner = &lease.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Pod", "python-7xk2p", "uid-1")
        );
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("uid-1"));
        assert_eq!(
            spec.lease_duration_seconds,
            Some(41),
            "rounded up, never shorter than asked"
        );
    }
}
