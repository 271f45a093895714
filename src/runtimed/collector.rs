//! The agent's edge to the artifact store: after a successful execution the Run's
//! `$KRUNTIME_ARTIFACTS_DIR` is stored on a blocking thread (the agent goes on meanwhile),
//! tried again with a growing pause while the store fails (the Run keeps its reservation and
//! its terminal status waits, never lost), and the result comes back as
//! a [`Collected`] on its [`Report`]. And the store's garbage collection: the artifacts of Runs that no
//! longer exist are removed every `--artifact-gc-interval`.
//!
//! The rules (names, bounds, layout) are [`super::artifacts`]'; this module only runs them and
//! lists the Runs that exist.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use super::Artifacts;
use super::artifacts::{self, ArtifactError, RunKey};
use super::report::Report;
use super::status_writer::Results;
use crate::api::Run;
use kube::api::{Api, ListParams};

/// The longest pause between two tries of a failing store.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// A successful Run whose artifacts are being stored: what its terminal write needs.
pub(super) struct Pending {
    pub name: String,
    pub uid: String,
    pub first: Run,
    pub terminal: super::executor::Terminal,
    pub outputs: std::collections::BTreeMap<String, String>,
}

/// The stored artifacts' refs (with the store's snapshot), or why the Run's artifacts break a
/// rule (the Run fails `ArtifactInvalid`).
pub(super) struct Collected {
    pub pending: Pending,
    pub stored: Result<Results, String>,
}

/// Stores `staging` for `pending` in the background; a [`Collected`] on `events` follows.
pub(super) fn spawn(
    store: Artifacts,
    staging: PathBuf,
    namespace: String,
    pending: Pending,
    events: Report<Box<Collected>>,
) {
    tokio::spawn(async move {
        let run = RunKey {
            namespace,
            name: pending.name.clone(),
            uid: pending.uid.clone(),
        };
        let mut pause = Duration::from_secs(1);
        let stored = loop {
            match try_once(&store, &staging, &run).await {
                Ok(results) => break Ok(results),
                Err(ArtifactError::Invalid(why)) => break Err(why),
                Err(ArtifactError::Store(why)) => {
                    tracing::warn!(run = %pending.name, "cannot store the artifacts of Run {}: {why}; trying again in {pause:?} (its terminal status waits)", pending.name);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        };
        events.send(Box::new(Collected { pending, stored }));
    });
}

async fn try_once(
    store: &Artifacts,
    staging: &std::path::Path,
    run: &RunKey,
) -> Result<Results, ArtifactError> {
    match store {
        Artifacts::None => Ok(Results::default()),
        Artifacts::Store(store) => Ok(Results {
            artifact_refs: store.collect(staging, run).await?,
            artifact_store: Some(store.snapshot()),
            ..Default::default()
        }),
        Artifacts::Unsupported(driver) => {
            let left = std::fs::read_dir(staging).map(|d| d.count()).unwrap_or(0);
            match left {
                0 => Ok(Results::default()),
                n => Err(ArtifactError::Invalid(format!(
                    "$KRUNTIME_ARTIFACTS_DIR holds {n} artifact(s), but the Runtime's spec.artifactStore driver {driver:?} is not one this runtimed stores to (filesystem, s3); none was stored"
                ))),
            }
        }
    }
}

/// Every `interval`, removes from `store` the artifacts of the Runs of `namespace` that no
/// longer exist: the store is read first, then the Runs are listed (a consistent read), so a
/// Run whose artifacts appeared in between is never taken for deleted.
pub(super) fn spawn_gc(
    runs: Api<Run>,
    namespace: String,
    store: artifacts::Store,
    interval: Duration,
) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let stored = match store.stored_runs(&namespace).await {
                Ok(stored) => stored,
                Err(e) => {
                    tracing::warn!(
                        "reading the artifact store for its garbage collection: {e}; trying at the next interval"
                    );
                    continue;
                }
            };
            if stored.is_empty() {
                continue;
            }
            let existing: HashSet<String> = match runs.list_metadata(&ListParams::default()).await {
                Ok(list) => list
                    .items
                    .into_iter()
                    .filter_map(|r| r.metadata.uid)
                    .collect(),
                Err(e) => {
                    tracing::warn!(
                        "listing the Runs of namespace {namespace} for the artifact store's garbage collection: {e}; trying at the next interval"
                    );
                    continue;
                }
            };
            let garbage = artifacts::garbage(&stored, &existing);
            for uid in store.remove_runs(&namespace, &garbage).await {
                tracing::info!("removed the artifacts of deleted Run {uid}");
            }
        }
    });
}
