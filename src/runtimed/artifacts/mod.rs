//! A Run's artifacts: what its execution leaves in `$KRUNTIME_ARTIFACTS_DIR`
//! (`<run dir>/artifacts`), stored after a successful execution in the Runtime's
//! `spec.artifactStore` and described by `status.artifactRefs`, in the Go project's shapes: a
//! file as it is, a directory as a deterministic `tar.gz`, each at
//! `namespaces/<namespace>/runs/<uid>/<name>` in the store (under its prefix), with its size
//! and SHA-256.
//!
//! This module owns the rules (names, bounds, the stored representation, the refs) and
//! dispatches to one driver per file: [`filesystem`] (the PersistentVolumeClaim mounted at
//! `--artifact-root`) and [`s3`] (an S3-compatible bucket). Never talks to the API server: the
//! agent writes the refs with the Run's terminal status and gives [`Store::remove_runs`] the
//! UIDs of the Runs that no longer exist.

pub mod filesystem;
pub mod s3;

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::stream::BoxStream;
use sha2::Digest as _;

/// The variable that names the directory a Run leaves its artifacts in.
pub const ENV_ARTIFACTS_DIR: &str = "KRUNTIME_ARTIFACTS_DIR";
/// That directory, in the Run's directory.
pub const STAGING_DIR: &str = "artifacts";
/// At most this many artifacts per Run (the Go project's bound).
pub const MAX_REFS: usize = 32;
/// The longest artifact name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// A directory artifact's media type: it is stored as a `tar.gz`.
pub const DIRECTORY_CONTENT_TYPE: &str = "application/gzip";

/// How much of a Run's artifacts a store takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest artifact (a directory: its archive), in bytes.
    pub max_artifact_bytes: u64,
    /// All of a Run's artifacts together, in bytes.
    pub max_total_bytes: u64,
}

/// The Runtime's artifact store, as this runtimed writes it.
#[derive(Debug, Clone)]
pub struct Store {
    pub backend: Backend,
    pub limits: Limits,
    /// Where S3 artifacts are staged: runtimed's own directory, which no task writes.
    pub scratch: PathBuf,
}

/// Where the bytes go.
#[derive(Debug, Clone)]
pub enum Backend {
    Filesystem(filesystem::Filesystem),
    S3(s3::S3),
}

/// The Run whose artifacts are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A stored artifact's bytes, as they are read back.
pub type Bytes = BoxStream<'static, std::io::Result<bytes::Bytes>>;

impl Store {
    /// `status.artifactStore`: the store a Run's artifacts were written to (the Runtime's
    /// `spec.artifactStore` as it was then), for whoever reads or cleans them up.
    pub fn snapshot(&self) -> serde_json::Value {
        match &self.backend {
            Backend::Filesystem(fs) => fs.snapshot(),
            Backend::S3(s3) => s3.snapshot(),
        }
    }

    /// Stores every artifact in `staging` (none when it is missing or empty) for `run`, in
    /// name order, and returns their refs. On any error what was stored for the Run is removed
    /// again (as the Go project rolls back).
    ///
    /// `staging` is `<workspace root>/<uid>/artifacts`, a directory the task could write: it is
    /// pinned first, below the workspace root and following no link, and read only through
    /// that descriptor (a link in its place, or in the Run directory's, stores nothing).
    pub async fn collect(
        &self,
        staging: &Path,
        run: &RunKey,
    ) -> Result<Vec<serde_json::Value>, ArtifactError> {
        let scratch = self.scratch.clone();
        let pinned = {
            let staging = staging.to_path_buf();
            tokio::task::spawn_blocking(move || pin_staging(&staging))
                .await
                .map_err(|e| ArtifactError::Store(e.to_string()))??
        };
        let Some(pinned) = pinned else {
            return Ok(Vec::new());
        };
        let result = self.collect_pinned(&pinned.path(), &scratch, run).await;
        drop(pinned);
        result
    }

    async fn collect_pinned(
        &self,
        staging: &Path,
        scratch: &Path,
        run: &RunKey,
    ) -> Result<Vec<serde_json::Value>, ArtifactError> {
        match &self.backend {
            Backend::Filesystem(fs) => {
                let (fs, staging, run, limits) =
                    (fs.clone(), staging.to_path_buf(), run.clone(), self.limits);
                tokio::task::spawn_blocking(move || fs.collect(&staging, &run, limits))
                    .await
                    .unwrap_or_else(|e| {
                        Err(ArtifactError::Store(format!(
                            "the collection did not finish: {e}"
                        )))
                    })
            }
            Backend::S3(s3) => s3.collect(staging, scratch, run, self.limits).await,
        }
    }

    /// The UIDs of the Runs of `namespace` that have artifacts in the store.
    pub async fn stored_runs(&self, namespace: &str) -> Result<Vec<String>, String> {
        match &self.backend {
            Backend::Filesystem(fs) => {
                let (fs, namespace) = (fs.clone(), namespace.to_string());
                tokio::task::spawn_blocking(move || fs.stored_runs(&namespace))
                    .await
                    .map_err(|e| e.to_string())
            }
            Backend::S3(s3) => s3.stored_runs(namespace).await,
        }
    }

    /// Removes the artifacts of the Runs `uids` of `namespace`; returns the UIDs removed (a
    /// failure is logged and tried again at the next collection).
    pub async fn remove_runs(&self, namespace: &str, uids: &[String]) -> Vec<String> {
        let mut removed = Vec::new();
        for uid in uids {
            let result = match &self.backend {
                Backend::Filesystem(fs) => {
                    let (fs, namespace, uid) = (fs.clone(), namespace.to_string(), uid.clone());
                    tokio::task::spawn_blocking(move || fs.remove_run(&namespace, &uid))
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()))
                }
                Backend::S3(s3) => s3.remove_run(namespace, uid).await,
            };
            match result {
                Ok(true) => removed.push(uid.clone()),
                Ok(false) => {}
                Err(e) => tracing::warn!("cannot remove the artifacts of deleted Run {uid}: {e}"),
            }
        }
        removed
    }

    /// The bytes of the artifact `name` of the Run `uid` of `namespace`; `None` when there is
    /// none. `uid` and `name` must be single path segments ([`check_name`]).
    pub async fn open(
        &self,
        namespace: &str,
        uid: &str,
        name: &str,
    ) -> Result<Option<Bytes>, String> {
        match &self.backend {
            Backend::Filesystem(fs) => fs.open(namespace, uid, name).await,
            Backend::S3(s3) => s3.open(namespace, uid, name).await,
        }
    }
}

/// `<root>/<uid>/artifacts` opened below `<root>`, following no link (`None`: there is none).
fn pin_staging(staging: &Path) -> Result<Option<super::task_files::PinnedDir>, ArtifactError> {
    let run_dir = staging.parent();
    let root = run_dir.and_then(Path::parent);
    let (Some(run_dir), Some(root)) = (run_dir, root) else {
        return Err(ArtifactError::Store(format!(
            "{} is not <workspace root>/<uid>/artifacts",
            staging.display()
        )));
    };
    let rel = Path::new(run_dir.file_name().unwrap_or_default()).join(STAGING_DIR);
    super::task_files::pin_dir(root, &rel)
        .map_err(|e| ArtifactError::Invalid(format!("$KRUNTIME_ARTIFACTS_DIR: {e}")))
}

/// The path of the Run `uid`'s artifacts, relative to the store's root (or prefix).
pub fn run_path(namespace: &str, uid: &str) -> String {
    format!("namespaces/{namespace}/runs/{uid}")
}

/// The path of a namespace's Runs' artifacts, relative to the store's root (or prefix).
pub fn runs_path(namespace: &str) -> String {
    format!("namespaces/{namespace}/runs")
}

/// Why a Run's artifacts were not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// The Run's artifacts break a rule: the Run fails `ArtifactInvalid` (never retried).
    #[error("{0}")]
    Invalid(String),
    /// The store failed (full, unmounted, unreachable, refused): the collection is tried again.
    #[error("{0}")]
    Store(String),
}

/// Whether `name` may name an artifact: 1 to 255 bytes, not `.` or `..`, no path separator.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an artifact needs a name".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "artifact name {name:?} is longer than {MAX_NAME_BYTES} bytes"
        ));
    }
    if name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(format!("artifact name {name:?} must not be a path"));
    }
    Ok(())
}

/// The names of the artifacts in `staging`, in name order, each a valid name, at most
/// [`MAX_REFS`]; none when it is missing.
pub fn staged_names(staging: &Path) -> Result<Vec<String>, ArtifactError> {
    let mut names = match std::fs::read_dir(staging) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ArtifactError::Store(format!(
                "cannot read $KRUNTIME_ARTIFACTS_DIR {}: {e}",
                staging.display()
            )));
        }
        Ok(entries) => entries
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| ArtifactError::Store(e.to_string()))?,
    };
    if names.len() > MAX_REFS {
        return Err(ArtifactError::Invalid(format!(
            "$KRUNTIME_ARTIFACTS_DIR holds {} artifacts; at most {MAX_REFS} are stored",
            names.len()
        )));
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let name = name.into_string().map_err(|name| {
                ArtifactError::Invalid(format!("artifact name {name:?} is not UTF-8"))
            })?;
            check_name(&name).map_err(ArtifactError::Invalid)?;
            Ok(name)
        })
        .collect()
}

/// What the bytes of one stored artifact are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub kind: &'static str,
    pub size: u64,
    pub digest: String,
    pub content_type: String,
}

impl Stored {
    /// The artifact's entry in `status.artifactRefs`, at `location` of `driver`.
    pub fn to_ref(
        &self,
        name: &str,
        driver: &str,
        location: serde_json::Value,
    ) -> serde_json::Value {
        let now = jiff::Timestamp::now();
        serde_json::json!({
            "name": name,
            "driver": driver,
            "type": self.kind,
            "sizeBytes": self.size,
            "digest": self.digest,
            "contentType": self.content_type,
            "createdAt": now.round(jiff::Unit::Second).unwrap_or(now).to_string(),
            "location": {driver: location},
        })
    }
}

/// Writes the stored representation of `source` (a file as it is, a directory archived) to
/// `out`, a new file (a link there is refused), at most `limit` bytes; `out` is removed when
/// that fails.
pub fn stage(source: &Path, out: &Path, name: &str, limit: u64) -> Result<Stored, ArtifactError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(out)
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    let budgeted = Budgeted::new(file, Some(out.to_path_buf()), limit);
    stage_into(source, budgeted, name).map(|(stored, _)| stored)
}

/// [`stage`] into an anonymous file of runtimed's (no name anyone could open or swap):
/// returns it rewound, for the upload to read exactly the bytes that were hashed.
/// The file is made in `scratch` (runtimed's state directory, on a volume of its own: its
/// root file system is read-only), without a name (`O_TMPFILE`).
pub fn stage_anonymous(
    source: &Path,
    scratch: &Path,
    name: &str,
    limit: u64,
) -> Result<(Stored, std::fs::File), ArtifactError> {
    let file = std::fs::create_dir_all(scratch)
        .and_then(|()| tempfile::tempfile_in(scratch))
        .map_err(|e| {
            ArtifactError::Store(format!(
                "artifact {name:?}: cannot create a temporary file in {}: {e}",
                scratch.display()
            ))
        })?;
    stage_into(source, Budgeted::new(file, None, limit), name)
}

fn stage_into(
    source: &Path,
    mut file: Budgeted,
    name: &str,
) -> Result<(Stored, std::fs::File), ArtifactError> {
    let limit = file.limit;
    let invalid = |why: String| ArtifactError::Invalid(format!("artifact {name:?}: {why}"));
    let meta = std::fs::symlink_metadata(source)
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(file.discard(invalid("symbolic links are not stored".into())));
    }
    if !kind.is_file() && !kind.is_dir() {
        return Err(file.discard(invalid(
            "only regular files and directories are stored".into(),
        )));
    }
    if kind.is_dir()
        && let Err(why) = check_tree(source)
    {
        return Err(file.discard(invalid(why)));
    }
    let (stored_kind, content_type) = if kind.is_file() {
        // Opened again through its descriptor, no link followed: what was checked above may
        // have been swapped since, what is copied is what this descriptor says it is.
        let mut input = open_staged(source).map_err(|e| file.discard(invalid(e)))?;
        std::io::copy(&mut input, &mut file).map_err(|e| file.error(name, limit, e))?;
        let guessed = mime_guess::from_path(name).first_or_octet_stream();
        ("file", guessed.essence_str().to_string())
    } else {
        let gzip = flate2::GzBuilder::new()
            .mtime(0)
            .write(&mut file, flate2::Compression::default());
        let mut archive = tar::Builder::new(gzip);
        archive.mode(tar::HeaderMode::Deterministic);
        archive.follow_symlinks(false);
        append_tree(&mut archive, source, Path::new(""))
            .and_then(|()| archive.into_inner()?.finish().map(|_| ()))
            .map_err(|e| file.error(name, limit, e))?;
        ("directory", DIRECTORY_CONTENT_TYPE.to_string())
    };
    let (size, digest, out) = file
        .finish()
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    let stored = Stored {
        kind: stored_kind,
        size,
        digest,
        content_type,
    };
    Ok((stored, out))
}

/// The regular file `path` of a Run's artifacts, opened below its directory without following
/// a link; why not, as a sentence.
fn open_staged(path: &Path) -> Result<std::fs::File, String> {
    let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} is not a file", path.display()));
    };
    super::task_files::open_regular(dir, Path::new(file), u64::MAX)
        .map(|regular| regular.file)
        .map_err(|e| e.to_string())
}

/// The Runs among `stored` (read before `existing` was listed) that no longer exist: a Run's
/// artifacts are stored only after it exists, and a UID is never reused, so one seen before a
/// consistent list that lacks its UID belongs to a deleted Run.
pub fn garbage(stored: &[String], existing: &HashSet<String>) -> Vec<String> {
    stored
        .iter()
        .filter(|uid| !existing.contains(*uid))
        .cloned()
        .collect()
}

/// What `limits` leave for the next artifact after `total` bytes.
fn next_limit(limits: Limits, total: u64) -> u64 {
    limits
        .max_artifact_bytes
        .min(limits.max_total_bytes.saturating_sub(total))
}

/// Only directories and regular files below `dir`: a symbolic link or a special file is not
/// archived (it could name what is not the Run's).
fn check_tree(dir: &Path) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        if kind.is_dir() {
            check_tree(&entry.path())?;
        } else if !kind.is_file() {
            return Err(format!(
                "{} is not a regular file or directory",
                entry.path().display()
            ));
        }
    }
    Ok(())
}

/// Appends `dir`'s tree to `archive` under `prefix`, in name order (the same tree gives the
/// same archive).
fn append_tree<W: std::io::Write>(
    archive: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = prefix.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            archive.append_dir(&path, entry.path())?;
            append_tree(archive, &entry.path(), &path)?;
        } else {
            let mut file = open_staged(&entry.path()).map_err(std::io::Error::other)?;
            archive.append_file(&path, &mut file)?;
        }
    }
    Ok(())
}

/// A file being written that counts and hashes its bytes and refuses more than its limit.
struct Budgeted {
    file: std::fs::File,
    path: Option<PathBuf>,
    written: u64,
    limit: u64,
    hash: sha2::Sha256,
}

impl Budgeted {
    /// Counts what is written to `file`, removed at `path` (when it has one) on failure.
    fn new(file: std::fs::File, path: Option<PathBuf>, limit: u64) -> Self {
        Budgeted {
            file,
            path,
            written: 0,
            limit,
            hash: sha2::Sha256::new(),
        }
    }

    /// Removes the partial file; returns `e`.
    fn discard(&self, e: ArtifactError) -> ArtifactError {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
        e
    }

    /// The error of a failed copy: over the limit is the Run's, anything else the store's.
    /// The partial file is removed.
    fn error(&self, name: &str, limit: u64, e: std::io::Error) -> ArtifactError {
        self.discard(match e.kind() {
            std::io::ErrorKind::FileTooLarge => ArtifactError::Invalid(format!(
                "artifact {name:?} is larger than {limit} bytes (--artifact-max-bytes, or what --artifacts-max-bytes leaves)"
            )),
            _ => ArtifactError::Store(format!("artifact {name:?}: {e}")),
        })
    }

    /// The size, the digest and the file, rewound.
    fn finish(mut self) -> std::io::Result<(u64, String, std::fs::File)> {
        use std::io::Seek as _;
        self.file.flush()?;
        self.file.sync_all()?;
        self.file.rewind()?;
        Ok((
            self.written,
            crate::util::digest::finish(self.hash),
            self.file,
        ))
    }
}

impl std::io::Write for Budgeted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            return Err(std::io::Error::from(std::io::ErrorKind::FileTooLarge));
        }
        let n = self.file.write(buf)?;
        self.hash.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests;
