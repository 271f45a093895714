//! What a WorkflowRun executes, frozen when it is accepted: its jobs and, for every step that
//! calls an Action, that Action's definition. Stored as a ControllerRevision the WorkflowRun
//! owns, in the Go kruntimes controller's shape and under its names, so a WorkflowRun that
//! controller accepted runs on here. Also the names of a WorkflowRun's children. Pure data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::{ActionSpec, WorkflowRunSpec};

/// The largest snapshot stored: a ControllerRevision is one etcd object.
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 20;

/// The frozen definition of one WorkflowRun.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub spec: WorkflowRunSpec,
    /// The Action each calling step runs, by [`action_key`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actions: BTreeMap<String, FrozenAction>,
}

/// One Action, as it was when the WorkflowRun was accepted.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct FrozenAction {
    pub name: String,
    pub spec: ActionSpec,
}

impl Snapshot {
    /// The Action that `step` of `job` calls.
    pub fn action(&self, job: &str, step: &str) -> Option<&FrozenAction> {
        self.actions.get(&action_key(job, step))
    }

    /// The snapshot as stored, or why it cannot be.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let raw = serde_json::to_vec(self).map_err(|e| format!("cannot encode: {e}"))?;
        if raw.len() > MAX_SNAPSHOT_BYTES {
            return Err(format!(
                "the WorkflowRun's snapshot is {} bytes, more than the {MAX_SNAPSHOT_BYTES} a snapshot may hold",
                raw.len()
            ));
        }
        Ok(raw)
    }

    /// A stored snapshot: it must decode and hold at least one job.
    pub fn decode(raw: &serde_json::Value) -> Result<Snapshot, String> {
        let snapshot: Snapshot =
            serde_json::from_value(raw.clone()).map_err(|e| format!("cannot decode: {e}"))?;
        if snapshot.spec.jobs.is_empty() {
            return Err("it holds no jobs".into());
        }
        Ok(snapshot)
    }
}

/// The key of the Action called by `step` of `job`.
pub fn action_key(job: &str, step: &str) -> String {
    format!("{job}\u{0}{step}")
}

/// The first ten hex digits of the SHA-256 of `text`.
fn digest(text: &str) -> String {
    let sum = Sha256::digest(text.as_bytes());
    sum.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

/// `prefix` + `separator` + `suffix`, the prefix cut (and its trailing `-`/`.` trimmed) so the
/// name stays within 253 characters.
fn bounded(prefix: &str, separator: &str, suffix: &str, alone: &str) -> String {
    let room = 253 - separator.len() - suffix.len();
    // Names are DNS subdomains, ASCII: cutting at a byte is cutting at a character.
    let prefix = if prefix.len() > room {
        prefix[..room].trim_end_matches(['-', '.'])
    } else {
        prefix
    };
    if prefix.is_empty() {
        format!("{alone}{suffix}")
    } else {
        format!("{prefix}{separator}{suffix}")
    }
}

/// The name of the snapshot of the WorkflowRun `name` with `uid`.
pub fn snapshot_name(name: &str, uid: &str) -> String {
    bounded(name, "-snapshot-", &digest(uid), "snapshot-")
}

/// The name of the Run of `step` of `job` (of `action_step` of its Action, when it calls one).
pub fn step_run_name(workflow_run: &str, job: &str, step: &str, action_step: &str) -> String {
    let suffix = digest(&format!("{job}/{step}/{action_step}"));
    bounded(workflow_run, "-", &suffix, "")
}

/// The name of the child WorkflowRun that `job` calls.
pub fn call_run_name(workflow_run: &str, job: &str) -> String {
    bounded(workflow_run, "-", &digest(job), "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_bounded() {
        let run = step_run_name("wf", "build", "test", "");
        assert_eq!(run, step_run_name("wf", "build", "test", ""));
        assert_ne!(run, step_run_name("wf", "build", "test", "a"));
        assert!(run.starts_with("wf-") && run.len() == 13, "{run}");
        let long = "a".repeat(300);
        assert_eq!(call_run_name(&long, "j").len(), 253);
        let snapshot = snapshot_name("wfr", "0000-uid");
        assert!(snapshot.starts_with("wfr-snapshot-"), "{snapshot}");
        // Cut to its room, a prefix loses the separators it then ends in; uncut, it keeps them.
        let cut = format!("{}-.xyz", "b".repeat(240));
        assert_eq!(
            bounded(&cut, "-", "0123456789", ""),
            format!("{}-0123456789", "b".repeat(240))
        );
        assert_eq!(bounded("b-", "-", "0123456789", ""), "b--0123456789");
    }

    #[test]
    fn the_digest_is_sha256s_first_ten_hex_digits() {
        // sha256("") = e3b0c44298fc1c14...
        assert_eq!(digest(""), "e3b0c44298");
    }
}
