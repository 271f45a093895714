//! A Run's artifacts: what its execution leaves in `$KRUNTIME_ARTIFACTS_DIR`
//! (`<run dir>/artifacts`), stored after a successful execution in the Runtime's filesystem
//! artifact store (its `spec.artifactStore.filesystem` PersistentVolumeClaim, mounted in the
//! Runtime Pod at `--artifact-root`) and described by `status.artifactRefs`, in the Go
//! project's shapes: a file as it is, a directory as a deterministic `tar.gz`, each at
//! `namespaces/<namespace>/runs/<uid>/<name>` under the store's root, with its size and
//! SHA-256.
//!
//! [`check_name`] and the refs are pure; [`collect`] and [`collect_garbage`] are blocking file
//! I/O, run on a blocking thread. Never talks to the API server: the agent writes the refs
//! with the Run's terminal status and gives [`collect_garbage`] the UIDs of the Runs that exist.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// The Runtime's filesystem artifact store, as this runtimed sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// Where the store's volume is mounted.
    pub root: PathBuf,
    /// `spec.artifactStore.filesystem.volumeClaimName`.
    pub volume_claim: String,
    /// The largest artifact (a directory: its archive), in bytes.
    pub max_artifact_bytes: u64,
    /// All of a Run's artifacts together, in bytes.
    pub max_total_bytes: u64,
}

impl Store {
    /// `status.artifactStore`: the store a Run's artifacts were written to (the Runtime's
    /// `spec.artifactStore` as it was then), for whoever cleans them up.
    pub fn snapshot(&self) -> serde_json::Value {
        serde_json::json!({
            "driver": "filesystem",
            "filesystem": {"volumeClaimName": self.volume_claim},
        })
    }

    /// The directory of the Run `uid`'s artifacts, relative to the root.
    pub fn run_path(namespace: &str, uid: &str) -> PathBuf {
        Path::new("namespaces")
            .join(namespace)
            .join("runs")
            .join(uid)
    }
}

/// Why a Run's artifacts were not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// The Run's artifacts break a rule: the Run fails `ArtifactInvalid` (never retried).
    #[error("{0}")]
    Invalid(String),
    /// The store failed (full, unmounted, an I/O error): the collection is tried again.
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

/// Stores every artifact in `staging` (none when it is missing or empty) for the Run `uid`
/// of `namespace`, in name order, and returns their refs. On any error, what was stored for
/// the Run is removed again (as the Go project rolls back).
pub fn collect(
    store: &Store,
    staging: &Path,
    namespace: &str,
    uid: &str,
) -> Result<Vec<serde_json::Value>, ArtifactError> {
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
    if names.is_empty() {
        return Ok(Vec::new());
    }
    if names.len() > MAX_REFS {
        return Err(ArtifactError::Invalid(format!(
            "$KRUNTIME_ARTIFACTS_DIR holds {} artifacts; at most {MAX_REFS} are stored",
            names.len()
        )));
    }
    names.sort();
    let relative = Store::run_path(namespace, uid);
    let result = store_all(store, staging, &relative, &names);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(store.root.join(&relative));
    }
    result
}

fn store_all(
    store: &Store,
    staging: &Path,
    relative: &Path,
    names: &[std::ffi::OsString],
) -> Result<Vec<serde_json::Value>, ArtifactError> {
    let dir = store.root.join(relative);
    std::fs::create_dir_all(&dir).map_err(|e| {
        ArtifactError::Store(format!(
            "cannot create {} in the artifact store (is its volume mounted at --artifact-root?): {e}",
            dir.display()
        ))
    })?;
    let mut refs = Vec::new();
    let mut total = 0u64;
    for name in names {
        let name = name.to_str().ok_or_else(|| {
            ArtifactError::Invalid(format!("artifact name {name:?} is not UTF-8"))
        })?;
        check_name(name).map_err(ArtifactError::Invalid)?;
        let source = staging.join(name);
        let limit = store
            .max_artifact_bytes
            .min(store.max_total_bytes.saturating_sub(total));
        let stored = store_one(&source, &dir, name, limit)?;
        total += stored.size;
        refs.push(serde_json::json!({
            "name": name,
            "driver": "filesystem",
            "type": stored.kind,
            "sizeBytes": stored.size,
            "digest": stored.digest,
            "contentType": stored.content_type,
            "createdAt": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()).to_string(),
            "location": {"filesystem": {
                "path": relative.join(name).to_string_lossy(),
                "volumeClaimName": store.volume_claim,
            }},
        }));
    }
    Ok(refs)
}

/// One stored artifact.
struct Stored {
    kind: &'static str,
    size: u64,
    digest: String,
    content_type: String,
}

/// Copies the file or archives the directory `source` to `dir/name` (through a temporary file,
/// renamed when complete, so a reader never sees half of it), at most `limit` bytes.
fn store_one(source: &Path, dir: &Path, name: &str, limit: u64) -> Result<Stored, ArtifactError> {
    let invalid = |why: String| ArtifactError::Invalid(format!("artifact {name:?}: {why}"));
    let meta = std::fs::symlink_metadata(source)
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    let kind = meta.file_type();
    let temporary = dir.join(format!(".{name}.partial"));
    let mut out = Budgeted::create(&temporary, limit)
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    let (stored_kind, content_type) = if kind.is_file() {
        let mut file = std::fs::File::open(source)
            .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
        std::io::copy(&mut file, &mut out).map_err(|e| out.error(name, limit, e))?;
        let guessed = mime_guess::from_path(name).first_or_octet_stream();
        ("file", guessed.essence_str().to_string())
    } else if kind.is_dir() {
        check_tree(source).map_err(invalid)?;
        let gzip = flate2::GzBuilder::new()
            .mtime(0)
            .write(&mut out, flate2::Compression::default());
        let mut archive = tar::Builder::new(gzip);
        archive.mode(tar::HeaderMode::Deterministic);
        archive.follow_symlinks(false);
        append_tree(&mut archive, source, Path::new(""))
            .and_then(|()| archive.into_inner()?.finish().map(|_| ()))
            .map_err(|e| out.error(name, limit, e))?;
        ("directory", DIRECTORY_CONTENT_TYPE.to_string())
    } else if kind.is_symlink() {
        let _ = std::fs::remove_file(&temporary);
        return Err(invalid("symbolic links are not stored".into()));
    } else {
        let _ = std::fs::remove_file(&temporary);
        return Err(invalid(
            "only regular files and directories are stored".into(),
        ));
    };
    let (size, digest) = out
        .finish()
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    std::fs::rename(&temporary, dir.join(name))
        .map_err(|e| ArtifactError::Store(format!("artifact {name:?}: {e}")))?;
    Ok(Stored {
        kind: stored_kind,
        size,
        digest,
        content_type,
    })
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
            archive.append_path_with_name(entry.path(), &path)?;
        }
    }
    Ok(())
}

/// A file being written that counts and hashes its bytes and refuses more than its limit.
struct Budgeted {
    file: std::fs::File,
    path: PathBuf,
    written: u64,
    limit: u64,
    hash: sha2::Sha256,
}

impl Budgeted {
    fn create(path: &Path, limit: u64) -> std::io::Result<Self> {
        Ok(Budgeted {
            file: std::fs::File::create(path)?,
            path: path.to_path_buf(),
            written: 0,
            limit,
            hash: sha2::Sha256::new(),
        })
    }

    /// The error of a failed copy: over the limit is the Run's, anything else the store's.
    /// The partial file is removed.
    fn error(&self, name: &str, limit: u64, e: std::io::Error) -> ArtifactError {
        let _ = std::fs::remove_file(&self.path);
        match e.kind() {
            std::io::ErrorKind::FileTooLarge => ArtifactError::Invalid(format!(
                "artifact {name:?} is larger than {limit} bytes (--artifact-max-bytes, or what --artifacts-max-bytes leaves)"
            )),
            _ => ArtifactError::Store(format!("artifact {name:?}: {e}")),
        }
    }

    fn finish(mut self) -> std::io::Result<(u64, String)> {
        self.file.flush()?;
        self.file.sync_all()?;
        Ok((self.written, crate::digest::finish(self.hash)))
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

/// The artifact directories of `namespace` under the store's root, by Run UID.
pub fn stored_runs(store: &Store, namespace: &str) -> Vec<String> {
    let dir = store.root.join("namespaces").join(namespace).join("runs");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut uids: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    uids.sort();
    uids
}

/// Removes the artifacts of the Runs among `stored` (read before `existing` was listed) that
/// no longer exist: a Run's artifacts are stored only after it exists, and a UID is never
/// reused, so a directory seen before a consistent list that lacks its UID belongs to a
/// deleted Run. Returns the UIDs removed.
pub fn collect_garbage(
    store: &Store,
    namespace: &str,
    stored: &[String],
    existing: &HashSet<String>,
) -> Vec<String> {
    let mut removed = Vec::new();
    for uid in stored.iter().filter(|uid| !existing.contains(*uid)) {
        let dir = store.root.join(Store::run_path(namespace, uid));
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => removed.push(uid.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "cannot remove the artifacts of deleted Run {uid} ({}): {e}",
                dir.display()
            ),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(root: &Path) -> Store {
        Store {
            root: root.to_path_buf(),
            volume_claim: "artifacts".into(),
            max_artifact_bytes: 1000,
            max_total_bytes: 1500,
        }
    }

    #[test]
    fn names_are_single_path_segments() {
        for ok in ["report.txt", "model", "a b"] {
            assert_eq!(check_name(ok), Ok(()));
        }
        for bad in ["", ".", "..", "a/b", "a\\b", &"x".repeat(256)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_and_directories_are_stored_with_size_digest_and_type() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = tmp.path().join("staging");
        std::fs::create_dir_all(staging.join("model/layers")).unwrap();
        std::fs::write(staging.join("report.json"), "{}").unwrap();
        std::fs::write(staging.join("model/layers/1"), "weights").unwrap();
        let s = store(&tmp.path().join("store"));
        let refs = collect(&s, &staging, "ns", "u1").unwrap();
        assert_eq!(refs.len(), 2);
        let (model, report) = (&refs[0], &refs[1]);
        assert_eq!(report["name"], "report.json");
        assert_eq!(report["type"], "file");
        assert_eq!(report["sizeBytes"], 2);
        assert_eq!(report["contentType"], "application/json");
        assert_eq!(
            report["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            report["location"]["filesystem"]["path"],
            "namespaces/ns/runs/u1/report.json"
        );
        assert_eq!(
            std::fs::read_to_string(s.root.join("namespaces/ns/runs/u1/report.json")).unwrap(),
            "{}"
        );
        assert_eq!(model["type"], "directory");
        assert_eq!(model["contentType"], DIRECTORY_CONTENT_TYPE);
        // The archive holds the tree, and the same tree gives the same archive.
        let bytes = std::fs::read(s.root.join("namespaces/ns/runs/u1/model")).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        let paths: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(paths, ["layers", "layers/1"]);
        let again = collect(&s, &staging, "ns", "u2").unwrap();
        assert_eq!(again[0]["digest"], model["digest"]);
    }

    #[test]
    fn breaking_a_bound_is_invalid_and_leaves_nothing_stored() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = tmp.path().join("staging");
        std::fs::create_dir_all(&staging).unwrap();
        let s = store(&tmp.path().join("store"));
        std::fs::write(staging.join("a"), vec![0u8; 800]).unwrap();
        std::fs::write(staging.join("b"), vec![0u8; 800]).unwrap();
        let err = collect(&s, &staging, "ns", "u1").unwrap_err();
        assert!(
            matches!(&err, ArtifactError::Invalid(m) if m.contains("\"b\" is larger than 700 bytes")),
            "{err}"
        );
        assert!(!s.root.join("namespaces/ns/runs/u1").exists());
        std::fs::remove_file(staging.join("b")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", staging.join("link")).unwrap();
        let err = collect(&s, &staging, "ns", "u1").unwrap_err();
        assert!(
            matches!(&err, ArtifactError::Invalid(m) if m.contains("symbolic")),
            "{err}"
        );
        std::fs::remove_file(staging.join("link")).unwrap();
        for i in 0..MAX_REFS {
            std::fs::write(staging.join(format!("f{i}")), "").unwrap();
        }
        let err = collect(&s, &staging, "ns", "u1").unwrap_err();
        assert!(
            matches!(&err, ArtifactError::Invalid(m) if m.contains("33 artifacts")),
            "{err}"
        );
    }

    #[test]
    fn garbage_is_the_artifacts_of_runs_that_no_longer_exist() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        for uid in ["kept", "gone"] {
            std::fs::create_dir_all(tmp.path().join(Store::run_path("ns", uid))).unwrap();
        }
        let stored = stored_runs(&s, "ns");
        assert_eq!(stored, ["gone", "kept"]);
        let existing = HashSet::from(["kept".to_string()]);
        assert_eq!(collect_garbage(&s, "ns", &stored, &existing), ["gone"]);
        assert_eq!(stored_runs(&s, "ns"), ["kept"]);
    }
}
