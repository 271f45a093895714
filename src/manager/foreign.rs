//! Another implementation's scheduler: the kruntimes project's Go scheduler and controller
//! elect their leaders with the Leases `kruntimes-scheduler.kruntimes.com` and
//! `kruntimes-controller.kruntimes.com` (controller-runtime, in their own namespace). Two
//! active schedulers would place Runs against each other's capacity, and two Runtime
//! controllers would both make Pods for every Runtime, so `scheduler run` never becomes active
//! while either Lease is held, and stops being active as soon as one is held again.
//!
//! Owns finding those Leases, the rules of when one counts as held (pure, `now` passed in:
//! [`Observed`] for the gate, by this process's own clock; [`holder`] by `renewTime`, for a
//! one-off look) and the gate between our own leadership and acting on it ([`gate`]). It must
//! not schedule, and it never writes a foreign Lease.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt as _};
use tokio::sync::watch;
use tracing::{info, warn};

/// The leader-election Lease of the kruntimes project's Go scheduler.
pub const FOREIGN_LEASE: &str = "kruntimes-scheduler.kruntimes.com";
/// The leader-election Lease of its controller (the Runtime controller among them).
pub const FOREIGN_CONTROLLER_LEASE: &str = "kruntimes-controller.kruntimes.com";
/// The namespace its Helm chart installs into, looked at when Leases may not be listed
/// cluster-wide.
pub const FOREIGN_NAMESPACE: &str = "kruntimes-system";

/// How often the gate looks at the foreign Lease.
const POLL: Duration = Duration::from_secs(2);

/// The foreign Lease while it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignLeader {
    pub namespace: String,
    pub lease: String,
    pub holder: String,
}

impl std::fmt::Display for ForeignLeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "another kruntimes scheduler holds the Lease {}/{} (holder {})",
            self.namespace, self.lease, self.holder
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
        lease: lease.name_any(),
        holder: holder.to_string(),
    })
}

/// The foreign Leases, looked up in every namespace (the Go project's namespace is its own
/// choice); where Leases may not be listed cluster-wide, in the `fallback` namespaces it may
/// read (one it may not read is skipped).
pub async fn list(client: &Client, fallback: &[String]) -> kube::Result<Vec<Lease>> {
    let mut out = Vec::new();
    for name in [FOREIGN_LEASE, FOREIGN_CONTROLLER_LEASE] {
        let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
        match Api::<Lease>::all(client.clone()).list(&by_name).await {
            Ok(list) => out.extend(list.items),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                for namespace in fallback {
                    let api = Api::<Lease>::namespaced(client.clone(), namespace);
                    match api.get_opt(name).await {
                        Ok(lease) => out.extend(lease),
                        Err(kube::Error::Api(s)) if s.code == 403 => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The holder of one of the foreign Leases at `now` by their `renewTime` (a one-off look, as
/// `install` makes; the gate judges by [`Observed`] instead).
pub async fn find(
    client: &Client,
    fallback: &[String],
    now: Timestamp,
) -> kube::Result<Option<ForeignLeader>> {
    Ok(list(client, fallback)
        .await?
        .iter()
        .find_map(|l| holder(l, now)))
}

/// What the gate has seen of the foreign Leases: each one's record and when, by this process's
/// own clock, it last changed. A Lease counts as held while its record changed less than its
/// duration ago, as client-go's leader elector judges a Lease it does not hold: the other
/// side's `renewTime` is never compared with our clock, so a skew between the two machines
/// cannot make a held Lease look lapsed. A Lease first seen counts as just renewed.
#[derive(Debug, Default)]
pub struct Observed {
    seen: HashMap<(String, String), (LeaseSpec, Instant)>,
}

impl Observed {
    /// The holder of one of `leases` (the current list) at `now`.
    pub fn holder(&mut self, leases: &[Lease], now: Instant) -> Option<ForeignLeader> {
        let keys: Vec<(String, String)> = leases
            .iter()
            .map(|l| (l.namespace().unwrap_or_default(), l.name_any()))
            .collect();
        self.seen.retain(|key, _| keys.contains(key));
        let mut held = None;
        for (lease, key) in leases.iter().zip(keys) {
            let record = lease.spec.clone().unwrap_or_default();
            let changed = match self.seen.get(&key) {
                Some((seen, at)) if *seen == record => *at,
                _ => {
                    self.seen.insert(key.clone(), (record.clone(), now));
                    now
                }
            };
            let Some(holder) = record.holder_identity.filter(|h| !h.is_empty()) else {
                continue;
            };
            let duration = u64::try_from(record.lease_duration_seconds.unwrap_or(15)).unwrap_or(0);
            if held.is_none() && now < changed + Duration::from_secs(duration) {
                held = Some(ForeignLeader {
                    namespace: key.0,
                    lease: key.1,
                    holder,
                });
            }
        }
        held
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
    let mut observed = Observed::default();
    loop {
        let found = list(&client, &fallback)
            .await
            .map(|leases| observed.holder(&leases, Instant::now()));
        if found.is_ok() {
            said_error = false;
        }
        match found {
            Ok(None) if *active.borrow() => {}
            Ok(None) => {
                if said_waiting {
                    info!("the foreign scheduler's Leases are free; becoming active");
                }
                let _ = active.send(true);
            }
            Ok(Some(leader)) if *active.borrow() => {
                return anyhow::anyhow!(
                    "{leader}: stopping so that two schedulers never place Runs at once; scale the other scheduler down first (docs/operations/migrating-from-go.md)"
                );
            }
            Ok(Some(leader)) => {
                if !said_waiting {
                    warn!(
                        "{leader}; waiting as a standby and placing no Run until it is released (scale the other scheduler down; docs/operations/migrating-from-go.md)"
                    );
                    said_waiting = true;
                }
            }
            // Once per outage, not every poll.
            Err(e) if !said_error => {
                said_error = true;
                warn!(
                    "cannot read the Leases of a foreign scheduler ({FOREIGN_LEASE}, {FOREIGN_CONTROLLER_LEASE}): {e}; retrying"
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
    fn the_gate_judges_a_lease_by_when_it_saw_it_change_not_by_its_renew_time() {
        let start = Instant::now();
        let mut observed = Observed::default();
        // Renewed "long ago" by a skewed clock: first seen, it counts as just renewed.
        let old = lease(Some("sched-0_abc"), 10, 15);
        assert!(observed.holder(std::slice::from_ref(&old), start).is_some());
        let later = start + Duration::from_secs(14);
        assert!(observed.holder(std::slice::from_ref(&old), later).is_some());
        // Unchanged for its whole duration: lapsed.
        let lapsed = start + Duration::from_secs(15);
        assert_eq!(observed.holder(std::slice::from_ref(&old), lapsed), None);
        // Renewed (any change of the record): held again, from now.
        let renewed = lease(Some("sched-0_abc"), 11, 15);
        assert!(
            observed
                .holder(std::slice::from_ref(&renewed), lapsed)
                .is_some()
        );
        // Released: free at once.
        let released = lease(Some(""), 12, 15);
        assert_eq!(observed.holder(&[released], lapsed), None);
        // Gone from the list: forgotten.
        assert_eq!(observed.holder(&[], lapsed), None);
        assert!(observed.seen.is_empty());
    }

    #[test]
    fn a_lease_counts_as_held_only_with_a_holder_and_before_it_lapses() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(
            holder(&lease(Some("sched-0_abc"), 990, 15), now),
            Some(ForeignLeader {
                namespace: "kruntimes-system".into(),
                lease: FOREIGN_LEASE.into(),
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
