//! Who leads the kruntimes scheduler, judged from its leader-election Lease ([`LEADER_LEASE`]):
//! the line `status` and `explain` print, so that a Run that "fits now" is not taken for one
//! about to be placed while no scheduler runs.
//!
//! Owns the rule, pure with `now` passed in: the holder leads while its last renewal plus the
//! Lease's duration lies after `now` (how [`crate::manager::foreign::holder`] counts a held
//! Lease too), and which of several Leases speaks for the view. Reading them is
//! [`super::load::leader_lease`]'s; the version on the Lease is written by the leader
//! ([`crate::manager::leader`]). [`Leader::line`] is the one line both commands print.
//!
//! `now` is this machine's clock and the renewal the leader's: a skew between the two moves
//! the verdict by as much, as it does for `kubectl get lease`'s readers.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt as _;
use serde::{Deserialize, Serialize};

use crate::manager::leader::{ANNOTATION_SCHEDULER_VERSION, LEADER_LEASE};
use crate::output::{Palette, Tone, age};

pub use crate::api::INSTALL_NAMESPACE;

/// `leaseDurationSeconds` of a Lease that does not say (client-go's default).
const DEFAULT_DURATION_SECONDS: i64 = 15;

/// What the loader found of the leader-election Lease. The default is "looked, found none".
#[derive(Debug, Clone, Default)]
pub struct LeaseRead {
    /// Every `kruntimes-scheduler` Lease found.
    pub leases: Vec<Lease>,
    /// Why a look could not be made (e.g. forbidden), one sentence per look.
    pub unreadable: Vec<String>,
}

/// Whether a scheduler leads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaderState {
    /// A holder renewed the Lease within its duration: a scheduler places Runs.
    Leading,
    /// The Lease lapsed or was released: no scheduler places Runs.
    Expired,
    /// No Lease: no scheduler (with leader election) has ever run where it was looked for.
    None,
    /// The Lease could not be read (e.g. forbidden), so nobody can tell.
    #[default]
    Unknown,
}

/// Who leads, as `status` and `explain` report it (`scheduler` in their `-o json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Leader {
    pub state: LeaderState,
    /// `spec.holderIdentity` (`None` once released).
    pub holder: Option<String>,
    /// The release of the replica that last became leader (annotation
    /// `kruntimes.io/scheduler-version`).
    pub version: Option<String>,
    /// The Lease's namespace; `None` when no Lease was read.
    pub namespace: Option<String>,
    /// `spec.acquireTime`: since when the holder leads.
    pub since: Option<Timestamp>,
    /// `spec.renewTime`.
    pub renewed: Option<Timestamp>,
    /// When the Lease lapses (lapsed) without a renewal.
    pub expires: Option<Timestamp>,
    /// One line saying all of the above.
    pub message: String,
}

impl Leader {
    /// Known not to run: nothing places a Run until a scheduler starts.
    pub fn none_runs(&self) -> bool {
        matches!(self.state, LeaderState::Expired | LeaderState::None)
    }

    /// The line `status` and `explain` print: `Scheduler: X leads in kubectl-kruntimes for 3m,
    /// version 0.1.0 (abc1234)`, or that none runs and what that means for Pending Runs, or
    /// that it cannot be told and why.
    pub fn line(&self, palette: &Palette) -> String {
        let (text, tone) = match self.state {
            LeaderState::Leading => (self.message.clone(), Tone::Good),
            LeaderState::Expired => (
                format!(
                    "none leads, Pending Runs wait unless one runs without leader election — {}",
                    self.message
                ),
                Tone::Bad,
            ),
            LeaderState::None => (format!("none found — {}", self.message), Tone::Bad),
            LeaderState::Unknown => (format!("unknown — {}", self.message), Tone::Warn),
        };
        format!("Scheduler: {}", palette.paint(&text, tone))
    }
}

/// The message of [`LeaderState::None`].
pub const NEVER_RAN: &str = "no kruntimes-scheduler Lease, so Pending Runs wait unless a scheduler without leader election (--leader-elect=false, which holds none) runs; install one (docs/operations/deploy.md) or run `kubectl kruntimes scheduler run`";

/// Who leads at `now`, from what was read. Of several Leases the one that speaks is a held one,
/// then the one in `shown` (the namespace the view shows, where `scheduler run` puts its Lease
/// by default), then the shipped install's, then the freshest. Not leading while a look failed
/// is [`LeaderState::Unknown`]: the Lease that was not read may be held.
pub fn judge(read: &LeaseRead, shown: Option<&str>, now: Timestamp) -> Leader {
    let best = read
        .leases
        .iter()
        .map(|lease| of_lease(lease, now))
        .max_by_key(|l| {
            (
                l.state == LeaderState::Leading,
                l.namespace.as_deref().is_some_and(|ns| Some(ns) == shown),
                l.namespace.as_deref() == Some(INSTALL_NAMESPACE),
                l.renewed,
            )
        });
    let unreadable = read.unreadable.join("; ");
    match best {
        Some(leader) if leader.state == LeaderState::Leading || unreadable.is_empty() => leader,
        Some(leader) => Leader {
            state: LeaderState::Unknown,
            message: format!(
                "cannot tell whether a scheduler runs: {}, and {unreadable}",
                leader.message
            ),
            ..leader
        },
        None if unreadable.is_empty() => Leader {
            state: LeaderState::None,
            message: NEVER_RAN.to_string(),
            ..Leader::default()
        },
        None => Leader {
            state: LeaderState::Unknown,
            message: format!("cannot tell whether a scheduler runs: {unreadable}"),
            ..Leader::default()
        },
    }
}

/// One Lease at `now`: held while a holder is set and its renewal (or acquisition) plus its
/// duration lies after `now`.
/// Whether `lease` is held at `now` (the rule [`judge`] applies).
pub fn held(lease: &Lease, now: Timestamp) -> bool {
    of_lease(lease, now).state == LeaderState::Leading
}

fn of_lease(lease: &Lease, now: Timestamp) -> Leader {
    let namespace = lease.namespace().unwrap_or_default();
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let since = spec.acquire_time.map(|t| t.0);
    let renewed = spec.renew_time.map(|t| t.0);
    let duration = spec
        .lease_duration_seconds
        .map_or(DEFAULT_DURATION_SECONDS, i64::from);
    let expires = renewed
        .or(since)
        .and_then(|t| t.checked_add(SignedDuration::from_secs(duration)).ok());
    let version = lease
        .annotations()
        .get(ANNOTATION_SCHEDULER_VERSION)
        .cloned();
    let lease_name = format!("Lease {namespace}/{LEADER_LEASE}");
    let (state, message) = match (&holder, expires) {
        (Some(holder), Some(expires)) if expires > now => {
            let mut m = format!("{holder} leads in {namespace}");
            if let Some(since) = since {
                m.push_str(&format!(" for {}", age(now.duration_since(since))));
            }
            if let Some(v) = &version {
                m.push_str(&format!(", version {v}"));
            }
            (LeaderState::Leading, m)
        }
        (Some(holder), Some(expires)) => (
            LeaderState::Expired,
            format!(
                "{lease_name} expired {} ago, held by {holder}",
                age(now.duration_since(expires))
            ),
        ),
        (Some(holder), None) => (
            LeaderState::Expired,
            format!("{lease_name} was never renewed, held by {holder}"),
        ),
        (None, _) => (
            LeaderState::Expired,
            format!("{lease_name} was released when its leader stopped"),
        ),
    };
    Leader {
        state,
        holder,
        version,
        namespace: Some(namespace),
        since,
        renewed,
        expires,
        message,
    }
}

/// A Lease `kruntimes-scheduler` in `ns`, acquired and renewed that many seconds before
/// [`crate::testing::NOW`], of `duration` seconds.
#[cfg(test)]
pub(crate) fn test_lease(
    ns: &str,
    holder: Option<&str>,
    acquired_ago: i64,
    renewed_ago: i64,
    duration: i32,
) -> Lease {
    let ago = |s: i64| {
        crate::testing::NOW
            .checked_sub(SignedDuration::from_secs(s))
            .unwrap()
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": LEADER_LEASE, "namespace": ns,
                     "annotations": {ANNOTATION_SCHEDULER_VERSION: "0.1.0 (abc1234)"}},
        "spec": {"holderIdentity": holder, "acquireTime": ago(acquired_ago),
                 "renewTime": ago(renewed_ago), "leaseDurationSeconds": duration}
    }))
    .unwrap()
}

/// A Lease the way kube-lease-manager leaves it on release: no holder, no times.
#[cfg(test)]
pub(crate) fn test_released(ns: &str) -> Lease {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": LEADER_LEASE, "namespace": ns},
        "spec": {}
    }))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::NOW;
    use test_lease as lease;
    use test_released as released;

    fn read(leases: Vec<Lease>, unreadable: &[&str]) -> LeaseRead {
        LeaseRead {
            leases,
            unreadable: unreadable.iter().map(|s| s.to_string()).collect(),
        }
    }

    const FORBIDDEN: &str = "leases.coordination.k8s.io \"kruntimes-scheduler\" is forbidden: User \"bob\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kubectl-kruntimes\"";

    #[test]
    fn the_judge_reads_leading_expired_none_and_unknown_from_the_lease() {
        let install = INSTALL_NAMESPACE;
        let table: Vec<(&str, LeaseRead, LeaderState, Option<&str>, String)> = vec![
            (
                "renewed within its duration",
                read(vec![lease(install, Some("sched-1"), 180, 2, 15)], &[]),
                LeaderState::Leading,
                Some(install),
                "sched-1 leads in kubectl-kruntimes for 3m, version 0.1.0 (abc1234)".into(),
            ),
            (
                "lapsed",
                read(vec![lease(install, Some("sched-1"), 900, 735, 15)], &[]),
                LeaderState::Expired,
                Some(install),
                "Lease kubectl-kruntimes/kruntimes-scheduler expired 12m ago, held by sched-1"
                    .into(),
            ),
            (
                "lapsing exactly now",
                read(vec![lease(install, Some("sched-1"), 60, 15, 15)], &[]),
                LeaderState::Expired,
                Some(install),
                "Lease kubectl-kruntimes/kruntimes-scheduler expired 0s ago, held by sched-1"
                    .into(),
            ),
            (
                "released",
                read(vec![released("team-a")], &[]),
                LeaderState::Expired,
                Some("team-a"),
                "Lease team-a/kruntimes-scheduler was released when its leader stopped".into(),
            ),
            (
                "no Lease anywhere",
                read(vec![], &[]),
                LeaderState::None,
                None,
                NEVER_RAN.into(),
            ),
            (
                "no Lease read, a look forbidden",
                read(vec![], &[FORBIDDEN]),
                LeaderState::Unknown,
                None,
                format!("cannot tell whether a scheduler runs: {FORBIDDEN}"),
            ),
            (
                "a lapsed Lease, and the install's forbidden",
                read(
                    vec![lease("team-a", Some("dev"), 100, 60, 15)],
                    &[FORBIDDEN],
                ),
                LeaderState::Unknown,
                Some("team-a"),
                format!(
                    "cannot tell whether a scheduler runs: Lease team-a/kruntimes-scheduler expired 45s ago, held by dev, and {FORBIDDEN}"
                ),
            ),
            (
                "a held Lease, though another look was forbidden",
                read(vec![lease("team-a", Some("dev"), 30, 1, 15)], &[FORBIDDEN]),
                LeaderState::Leading,
                Some("team-a"),
                "dev leads in team-a for 30s, version 0.1.0 (abc1234)".into(),
            ),
        ];
        for (case, read, state, namespace, message) in table {
            let leader = judge(&read, Some("team-a"), NOW);
            assert_eq!(leader.state, state, "{case}");
            assert_eq!(leader.namespace.as_deref(), namespace, "{case}");
            assert_eq!(leader.message, message, "{case}");
        }
    }

    #[test]
    fn a_held_lease_speaks_first_then_the_shown_namespace_then_the_install_then_the_freshest() {
        let table = [
            (
                "held beats lapsed, wherever",
                vec![
                    lease("team-a", Some("dev"), 900, 600, 15),
                    lease("other", Some("far"), 60, 1, 15),
                ],
                "far",
            ),
            (
                "two held: the shown namespace's",
                vec![
                    lease(INSTALL_NAMESPACE, Some("installed"), 60, 1, 15),
                    lease("team-a", Some("dev"), 60, 2, 15),
                ],
                "dev",
            ),
            (
                "two lapsed elsewhere: the install's",
                vec![
                    lease("other", Some("far"), 900, 100, 15),
                    lease(INSTALL_NAMESPACE, Some("installed"), 900, 600, 15),
                ],
                "installed",
            ),
            (
                "lapsed in other namespaces: the freshest",
                vec![
                    lease("x", Some("older"), 900, 600, 15),
                    lease("y", Some("newer"), 900, 100, 15),
                ],
                "newer",
            ),
        ];
        for (case, leases, holder) in table {
            let leader = judge(&read(leases, &[]), Some("team-a"), NOW);
            assert_eq!(leader.holder.as_deref(), Some(holder), "{case}");
        }
    }

    #[test]
    fn the_judge_holds_a_lease_exactly_when_the_foreign_gate_would() {
        for (acquired, renewed, duration) in [(60, 1, 15), (60, 14, 15), (60, 15, 15), (90, 80, 4)]
        {
            let l = lease("ns", Some("h"), acquired, renewed, duration);
            let held = crate::manager::foreign::holder(&l, NOW).is_some();
            let leader = judge(&read(vec![l], &[]), None, NOW);
            assert_eq!(
                leader.state == LeaderState::Leading,
                held,
                "renewed {renewed}s ago for {duration}s"
            );
        }
        assert!(crate::manager::foreign::holder(&released("ns"), NOW).is_none());
        assert_eq!(
            judge(&read(vec![released("ns")], &[]), None, NOW).state,
            LeaderState::Expired
        );
    }

    #[test]
    fn the_state_is_written_as_the_schema_says() {
        let leader = judge(
            &read(vec![lease("ns", Some("h"), 60, 1, 15)], &[]),
            None,
            NOW,
        );
        let json = serde_json::to_value(&leader).unwrap();
        assert_eq!(json["state"], "Leading");
        assert_eq!(json["holder"], "h");
        assert_eq!(json["version"], "0.1.0 (abc1234)");
        assert_eq!(json["namespace"], "ns");
        assert!(json["since"].is_string() && json["renewed"].is_string());
        assert!(json["expires"].is_string());
        let none = serde_json::to_value(judge(&LeaseRead::default(), None, NOW)).unwrap();
        assert_eq!(none["state"], "None");
        assert_eq!(none["holder"], serde_json::Value::Null);
    }

    fn leader(state: LeaderState, message: &str) -> Leader {
        Leader {
            state,
            message: message.into(),
            ..Leader::default()
        }
    }

    #[test]
    fn the_line_says_who_leads_or_that_pending_runs_wait_for_nobody() {
        let table = [
            (
                LeaderState::Leading,
                "sched-1 leads in kubectl-kruntimes for 3m, version 0.1.0 (abc1234)",
                "Scheduler: sched-1 leads in kubectl-kruntimes for 3m, version 0.1.0 (abc1234)",
                "\u{1b}[32m",
            ),
            (
                LeaderState::Expired,
                "Lease kubectl-kruntimes/kruntimes-scheduler expired 12m ago, held by sched-1",
                "Scheduler: none leads, Pending Runs wait unless one runs without leader election — Lease kubectl-kruntimes/kruntimes-scheduler expired 12m ago, held by sched-1",
                "\u{1b}[31m",
            ),
            (
                LeaderState::None,
                NEVER_RAN,
                "Scheduler: none found — no kruntimes-scheduler Lease, so Pending Runs wait unless a scheduler without leader election (--leader-elect=false, which holds none) runs; install one (docs/operations/deploy.md) or run `kubectl kruntimes scheduler run`",
                "\u{1b}[31m",
            ),
            (
                LeaderState::Unknown,
                "cannot tell whether a scheduler runs: forbidden",
                "Scheduler: unknown — cannot tell whether a scheduler runs: forbidden",
                "\u{1b}[33m",
            ),
        ];
        for (state, message, want, color) in table {
            let l = leader(state, message);
            assert_eq!(l.line(&Palette::plain()), want);
            assert!(
                l.line(&Palette::new(true)).contains(color),
                "{state:?} is painted {color:?}"
            );
        }
    }
}
