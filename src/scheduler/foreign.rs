//! Another implementation's scheduler: the kruntimes project's Go scheduler elects its leader
//! with the Lease `kruntimes-scheduler.kruntimes.com` (controller-runtime, in its own
//! namespace). Two active schedulers would place Runs against each other's capacity, so
//! `scheduler run` never becomes active while that Lease is held, and stops being active as
//! soon as it is held again.
//!
//! Owns finding that Lease and the rule of when it counts as held ([`holder`], pure, with
//! `now` passed in) and the gate between our own leadership and acting on it ([`gate`]). It
//! must not schedule, and it never writes the foreign Lease.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt as _};
use tokio::sync::watch;
use tracing::{info, warn};

/// The leader-election Lease of the kruntimes project's Go scheduler.
pub const FOREIGN_LEASE: &str = "kruntimes-scheduler.kruntimes.com";

/// How often the gate looks at the foreign Lease.
const POLL: Duration = Duration::from_secs(2);

/// The foreign Lease while it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignLeader {
    pub namespace: String,
    pub holder: String,
}

impl std::fmt::Display for ForeignLeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "another kruntimes scheduler holds the Lease {}/{FOREIGN_LEASE} (holder {})",
            self.namespace, self.holder
        )
    }
}

/// Who holds `lease` at `now`: a holder is set and its last renewal (or acquisition) plus the
/// lease duration lies after `now`. A released Lease (no holder) or a lapsed one is free.
pub fn holder(lease: &Lease, now: Timestamp) -> Option<ForeignLeader> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    let expires = renewed
        .checked_add(jiff::SignedDuration::from_secs(duration))
        .ok()?;
    (expires > now).then(|| ForeignLeader {
        namespace: lease.namespace().unwrap_or_default(),
        holder: holder.to_string(),
    })
}

/// The foreign Lease's holder, looked up in every namespace (the Go scheduler's namespace is
/// its own choice); where Leases may not be listed cluster-wide, in `fallback` namespaces.
pub async fn find(client: &Client, fallback: &[String]) -> kube::Result<Option<ForeignLeader>> {
    let by_name = ListParams::default().fields(&format!("metadata.name={FOREIGN_LEASE}"));
    let now = Timestamp::now();
    match Api::<Lease>::all(client.clone()).list(&by_name).await {
        Ok(list) => Ok(list.items.iter().find_map(|l| holder(l, now))),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            for namespace in fallback {
                let api = Api::<Lease>::namespaced(client.clone(), namespace);
                if let Some(lease) = api.get_opt(FOREIGN_LEASE).await?
                    && let Some(leader) = holder(&lease, now)
                {
                    return Ok(Some(leader));
                }
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Passes our own leadership (`leading`) on to `active` only while no foreign scheduler holds
/// its Lease: it waits as a standby (saying so, once) while the Lease is held, and returns an
/// error naming the holder when the Lease is taken while we are active, so that the process
/// stops before two schedulers place Runs. A failed look is retried and never counts as free.
pub async fn gate(
    client: Client,
    fallback: Vec<String>,
    mut leading: watch::Receiver<bool>,
    active: watch::Sender<bool>,
) -> anyhow::Error {
    if leading.wait_for(|l| *l).await.is_err() {
        return anyhow::anyhow!("leader election stopped");
    }
    let mut said_waiting = false;
    let mut said_error = false;
    loop {
        let found = find(&client, &fallback).await;
        if found.is_ok() {
            said_error = false;
        }
        match found {
            Ok(None) if *active.borrow() => {}
            Ok(None) => {
                if said_waiting {
                    info!("the foreign scheduler Lease {FOREIGN_LEASE} is free; becoming active");
                }
                let _ = active.send(true);
            }
            Ok(Some(leader)) if *active.borrow() => {
                return anyhow::anyhow!(
                    "{leader}: stopping so that two schedulers never place Runs at once; scale the other scheduler down first (README, \"Moving from the Go kruntimes scheduler\")"
                );
            }
            Ok(Some(leader)) => {
                if !said_waiting {
                    warn!(
                        "{leader}; waiting as a standby and placing no Run until it is released (scale the other scheduler down; README, \"Moving from the Go kruntimes scheduler\")"
                    );
                    said_waiting = true;
                }
            }
            // Once per outage, not every poll.
            Err(e) if !said_error => {
                said_error = true;
                warn!(
                    "cannot read the Lease {FOREIGN_LEASE} of a foreign scheduler: {e}; retrying"
                );
            }
            Err(_) => {}
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: i64, duration: i32) -> Lease {
        Lease {
            metadata: kube::api::ObjectMeta {
                name: Some(FOREIGN_LEASE.into()),
                namespace: Some("kruntimes-system".into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
                lease_duration_seconds: Some(duration),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_lease_counts_as_held_only_with_a_holder_and_before_it_lapses() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(
            holder(&lease(Some("sched-0_abc"), 990, 15), now),
            Some(ForeignLeader {
                namespace: "kruntimes-system".into(),
                holder: "sched-0_abc".into()
            })
        );
        assert_eq!(
            holder(&lease(Some("sched-0_abc"), 980, 15), now),
            None,
            "lapsed"
        );
        assert_eq!(holder(&lease(Some(""), 999, 15), now), None, "released");
        assert_eq!(holder(&lease(None, 999, 15), now), None, "never held");
    }
}
