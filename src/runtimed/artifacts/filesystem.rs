//! The filesystem artifact store: the Runtime's `spec.artifactStore.filesystem`
//! PersistentVolumeClaim, mounted in the Runtime Pod at `--artifact-root` (every Pod of the
//! Runtime mounts the same claim). Blocking file I/O, run on a blocking thread by
//! [`super::Store`]; the rules are [`super`]'s.

use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use tokio::io::AsyncReadExt as _;

use super::{ArtifactError, Limits, RunKey, run_path, runs_path, stage, staged_names};

/// The store's mount and claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    /// Where the store's volume is mounted.
    pub root: PathBuf,
    /// `spec.artifactStore.filesystem.volumeClaimName`.
    pub volume_claim: String,
}

impl Filesystem {
    pub fn snapshot(&self) -> serde_json::Value {
        serde_json::json!({
            "driver": "filesystem",
            "filesystem": {"volumeClaimName": self.volume_claim},
        })
    }

    /// Each artifact goes through a temporary file in the Run's directory, renamed when
    /// complete, so a reader never sees half of one.
    pub fn collect(
        &self,
        staging: &Path,
        run: &RunKey,
        limits: Limits,
    ) -> Result<Vec<serde_json::Value>, ArtifactError> {
        let names = staged_names(staging)?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let relative = run_path(&run.namespace, &run.uid);
        let dir = self.root.join(&relative);
        let result = (|| {
            std::fs::create_dir_all(&dir).map_err(|e| {
                ArtifactError::Store(format!(
                    "cannot create {} in the artifact store (is its volume mounted at --artifact-root?): {e}",
                    dir.display()
                ))
            })?;
            let mut refs = Vec::new();
            let mut total = 0u64;
            for name in &names {
                let temporary = dir.join(format!(".{name}.partial"));
                let limit = super::next_limit(limits, total);
                let stored = stage(&staging.join(name), &temporary, name, limit)?;
                std::fs::rename(&temporary, dir.join(name))
                    .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
                total += stored.size;
                let location = serde_json::json!({
                    "path": format!("{relative}/{name}"),
                    "volumeClaimName": self.volume_claim,
                });
                refs.push(stored.to_ref(name, "filesystem", location));
            }
            Ok(refs)
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    pub fn stored_runs(&self, namespace: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.root.join(runs_path(namespace))) else {
            return Vec::new();
        };
        let mut uids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        uids.sort();
        uids
    }

    /// Removes the Run's directory; whether there was one.
    pub fn remove_run(&self, namespace: &str, uid: &str) -> Result<bool, String> {
        let dir = self.root.join(run_path(namespace, uid));
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("{}: {e}", dir.display())),
        }
    }

    pub async fn open(
        &self,
        namespace: &str,
        uid: &str,
        name: &str,
    ) -> Result<Option<super::Bytes>, String> {
        let path = self.root.join(run_path(namespace, uid)).join(name);
        let file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let chunks = futures::stream::unfold(file, |mut file| async move {
            let mut buf = vec![0u8; 64 * 1024];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(bytes::Bytes::from(buf)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        Ok(Some(chunks.boxed()))
    }
}
