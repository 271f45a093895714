//! A Run's directory on the Pod's workspace volume: `<root>/<run uid>` (`/workspace/<uid>` in
//! a Runtime Pod, where the runtime server's container mounts the same volume). Before each
//! attempt it is created, the Run's inline source is written into the working directory and the
//! last attempt's outputs file is removed; after a successful attempt the outputs file
//! (`$KRUNTIME_OUTPUTS`) is read; once the Run's last status has landed the directory is
//! removed. It survives between the attempts of a Run, as the Go project keeps it.
//!
//! A Run that names a PersistentWorkspace works in that workspace's directory
//! (`<root>/persistent/<name>`), which outlives it; its source is written there and its outputs
//! file stays in the Run's own directory.
//!
//! [`Layout`] is pure (the paths, and the task's working directory and environment in them);
//! [`Layout::create`], [`read_outputs`] and [`remove`] are the only file I/O of a Run's
//! execution besides the process itself. Never talks to the API server or the runtime server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::executor::Prepared;
use super::outputs::{self, OutputsError};
use super::task_files;

/// The environment variable that names a PersistentWorkspace Run's workspace directory.
pub const ENV_WORKSPACE: &str = "KRUNTIMES_WORKSPACE";

/// Where one Run's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<root>/<uid>`: the outputs file, and the working directory unless a workspace is set.
    pub run_dir: PathBuf,
    /// Where the task runs and its source is written.
    pub working_dir: PathBuf,
    /// The PersistentWorkspace's directory, when the Run names one.
    pub workspace: Option<PathBuf>,
    /// Whether the Runtime stores artifacts: the Run gets `$KRUNTIME_ARTIFACTS_DIR`.
    pub artifacts: bool,
}

/// Where the PersistentWorkspace `name` lives under the Pod's workspace volume `root`
/// (`/workspace/persistent/<name>` with the default root, as its `status.path` says).
pub fn workspace_dir(root: &Path, name: &str) -> PathBuf {
    root.join("persistent").join(name)
}

impl Layout {
    /// The files of the Run `uid` under the workspace volume `root`, in the PersistentWorkspace
    /// `workspace` when it names one.
    pub fn of(root: &Path, uid: &str, workspace: Option<&str>) -> Self {
        let run_dir = root.join(uid);
        let workspace = workspace.map(|name| workspace_dir(root, name));
        Layout {
            working_dir: workspace.clone().unwrap_or_else(|| run_dir.clone()),
            run_dir,
            workspace,
            artifacts: false,
        }
    }

    /// This layout with `$KRUNTIME_ARTIFACTS_DIR` when `artifacts`.
    pub fn with_artifacts(self, artifacts: bool) -> Self {
        Layout { artifacts, ..self }
    }

    /// `$KRUNTIME_ARTIFACTS_DIR`: emptied before every attempt, read after a successful one.
    pub fn staging(&self) -> PathBuf {
        self.run_dir.join(super::artifacts::STAGING_DIR)
    }

    /// Where a Git source is checked out: the working directory of its task.
    pub fn checkout_dir(&self) -> PathBuf {
        self.run_dir.join(super::git::CHECKOUT_DIR)
    }

    /// The file `$KRUNTIME_OUTPUTS` names.
    pub fn outputs(&self) -> PathBuf {
        self.run_dir.join(outputs::FILE)
    }

    /// `task` run in this layout: its working directory is the Run's, or the checkout of its
    /// Git source (a relative
    /// `mode.task.workingDir` is taken below it; an absolute one is kept), `KRUNTIME_OUTPUTS`
    /// names the outputs file (over a value of the Run's own, as the Go project sets it), and
    /// `KRUNTIMES_WORKSPACE` names a PersistentWorkspace's directory unless the Run sets it.
    pub fn apply(&self, mut task: Prepared) -> Prepared {
        let base = match task.git {
            Some(_) => self.checkout_dir(),
            None => self.working_dir.clone(),
        };
        let working_dir = match task.working_dir.as_deref() {
            Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
            Some(d) => base.join(d),
            None => base,
        };
        task.working_dir = Some(working_dir.display().to_string());
        task.env.retain(|(k, _)| k != outputs::ENV_OUTPUTS);
        task.env.push((
            outputs::ENV_OUTPUTS.to_string(),
            self.outputs().display().to_string(),
        ));
        if self.artifacts {
            task.env
                .retain(|(k, _)| k != super::artifacts::ENV_ARTIFACTS_DIR);
            task.env.push((
                super::artifacts::ENV_ARTIFACTS_DIR.to_string(),
                self.staging().display().to_string(),
            ));
        }
        if let Some(dir) = &self.workspace
            && !task.env.iter().any(|(k, _)| k == ENV_WORKSPACE)
        {
            task.env
                .push((ENV_WORKSPACE.to_string(), dir.display().to_string()));
        }
        task
    }

    /// Makes the directories of an attempt of `task` (already [`Self::apply`]d): the Run's
    /// and the working directory, the source file written (mode 0755 for a script that is the
    /// program, else 0644), the last attempt's outputs file removed and its artifacts
    /// directory emptied. Why it cannot, as the
    /// Run's `StartFailed` message.
    pub fn create(&self, task: &Prepared) -> Result<(), String> {
        let mounted = "(is the Pod's workspace volume mounted at --workspace-root?)";
        for dir in [Some(&self.run_dir), self.workspace.as_ref()]
            .into_iter()
            .flatten()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                format!(
                    "cannot create the directory {}: {e} {mounted}",
                    dir.display()
                )
            })?;
        }
        match std::fs::remove_file(self.outputs()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "cannot remove the last attempt's outputs file {}: {e}",
                    self.outputs().display()
                ));
            }
            _ => {}
        }
        if self.artifacts {
            let staging = self.staging();
            let _ = std::fs::remove_dir_all(&staging);
            std::fs::create_dir_all(&staging).map_err(|e| {
                format!(
                    "cannot create $KRUNTIME_ARTIFACTS_DIR {}: {e}",
                    staging.display()
                )
            })?;
        }
        if let Some(source) = &task.source {
            // A path inside the working directory: `prepare` refused any other.
            let file = self.working_dir.join(&source.path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    format!("cannot create the directory {}: {e}", parent.display())
                })?;
            }
            write_file(&file, source.text.as_bytes(), source.executable).map_err(|e| {
                format!("cannot write spec.source.inline to {}: {e}", file.display())
            })?;
        }
        Ok(())
    }
}

/// How long reading a Run's outputs file may take before the Run fails for it.
pub const OUTPUTS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The outputs the attempt of the Run `uid` left in `$KRUNTIME_OUTPUTS` (none when it wrote
/// no file), read below the workspace volume `root` through [`task_files`]: no link followed,
/// a regular file only, its size checked before it is read, off the caller's event loop.
pub async fn read_outputs(
    root: &Path,
    uid: &str,
) -> Result<BTreeMap<String, String>, OutputsError> {
    let rel = Path::new(uid).join(outputs::FILE);
    let limit = outputs::MAX_FILE_BYTES as u64;
    match task_files::read_regular_off_loop(root.to_path_buf(), rel, limit, OUTPUTS_DEADLINE).await
    {
        Ok(None) => Ok(BTreeMap::new()),
        Ok(Some(bytes)) => outputs::parse(&bytes),
        Err(task_files::FileError::TooLarge { size, .. }) => Err(OutputsError::FileTooLarge(size)),
        Err(e) => Err(OutputsError::Unreadable(e.to_string())),
    }
}

/// The name a directory being removed is given first, beside it on the workspace volume.
const REMOVING: &str = ".kruntimes-removing-";

/// Removes the directory of the Run `uid` (its last status has landed, or it is gone). A
/// PersistentWorkspace's directory is elsewhere and stays. The directory is renamed aside at
/// once, to a new name beside it (the Run's next attempt, placed here again, starts in a new
/// one), and removed on the blocking pool: a task that left a million files never holds up
/// the caller. rename(2) moves a link as a link and `remove_dir_all` removes a link it is
/// given, never what it points to, so nothing outside the volume is reached. Needs a tokio
/// runtime.
pub fn remove(root: &Path, uid: &str) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = root.join(uid);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let aside = root.join(format!("{REMOVING}{uid}-{}-{seq}", std::process::id()));
    match std::fs::rename(&dir, &aside) {
        Ok(()) => drop(tokio::task::spawn_blocking(move || remove_now(&aside))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(
                "cannot move the directory {} of a finished Run aside: {e}",
                dir.display()
            );
        }
    }
}

/// Removes what earlier removals left aside (runtimed stopped while they ran), in the
/// background.
pub fn remove_set_aside(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let left: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(REMOVING))
        .map(|e| e.path())
        .collect();
    drop(tokio::task::spawn_blocking(move || {
        left.iter().for_each(|dir| remove_now(dir))
    }));
}

fn remove_now(dir: &Path) {
    // std's remove_dir_all removes a link as a link and never follows one out of the tree
    // (CVE-2022-21658).
    let removed = match std::fs::symlink_metadata(dir) {
        Ok(meta) if !meta.is_dir() => std::fs::remove_file(dir),
        _ => std::fs::remove_dir_all(dir),
    };
    if let Err(e) = removed
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(
            "cannot remove the directory {} of a finished Run: {e}",
            dir.display()
        );
    }
}

/// The UIDs of the Run directories under `root` that are not in `live`: only directories
/// named as a Kubernetes UID (8-4-4-4-12 hexadecimal digits), never the `persistent` tree, the
/// logs or anything else kept on the volume.
pub fn stale(root: &Path, live: &std::collections::HashSet<String>) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut stale: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_uid(name) && !live.contains(name))
        .collect();
    stale.sort();
    stale
}

fn is_uid(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn write_file(path: &Path, bytes: &[u8], executable: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mode = if executable { 0o755 } else { 0o644 };
    // Written anew each attempt: a retried Run runs the same source.
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CodeSource, TaskMode};
    use crate::runtimed::executor::prepare;
    use crate::testing::task_mode as task;

    #[test]
    fn a_run_works_in_its_own_directory_with_the_outputs_file_named() {
        let layout = Layout::of(Path::new("/w"), "u1", None);
        let p = layout.apply(prepare(Some(&task(&["make"])), &[], None).unwrap());
        assert_eq!(p.working_dir.as_deref(), Some("/w/u1"));
        assert_eq!(
            p.env,
            [("KRUNTIME_OUTPUTS".to_string(), "/w/u1/outputs".to_string())]
        );
    }

    #[test]
    fn a_workspace_task_runs_in_its_directory_with_the_variable_set() {
        let root = Path::new("/w");
        assert_eq!(workspace_dir(root, "ws"), Path::new("/w/persistent/ws"));
        let layout = Layout::of(root, "u1", Some("ws"));
        let p = layout.apply(prepare(Some(&task(&["make"])), &[], None).unwrap());
        assert_eq!(p.working_dir.as_deref(), Some("/w/persistent/ws"));
        assert_eq!(
            p.env,
            [
                ("KRUNTIME_OUTPUTS".to_string(), "/w/u1/outputs".to_string()),
                (
                    "KRUNTIMES_WORKSPACE".to_string(),
                    "/w/persistent/ws".to_string()
                ),
            ]
        );
        let mut t = task(&["make"]);
        t.working_dir = Some("src".into());
        let p = layout.apply(prepare(Some(&t), &[], None).unwrap());
        assert_eq!(p.working_dir.as_deref(), Some("/w/persistent/ws/src"));
        t.working_dir = Some("/elsewhere".into());
        let p = layout.apply(prepare(Some(&t), &[], None).unwrap());
        assert_eq!(p.working_dir.as_deref(), Some("/elsewhere"));
    }

    #[tokio::test]
    async fn create_writes_the_source_removes_old_outputs_and_remove_takes_the_directory() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::of(root.path(), "u1", None);
        let source = CodeSource {
            inline: Some("#!/bin/sh\necho hi\n".into()),
            ..Default::default()
        };
        let p = layout.apply(prepare(Some(&TaskMode::default()), &[], Some(&source)).unwrap());
        layout.create(&p).unwrap();
        let script = root.path().join("u1/script");
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        std::fs::write(layout.outputs(), "a=1\n").unwrap();
        assert_eq!(read_outputs(root.path(), "u1").await.unwrap().len(), 1);
        // The next attempt starts without the last one's outputs.
        layout.create(&p).unwrap();
        assert!(read_outputs(root.path(), "u1").await.unwrap().is_empty());
        // A link in the file's place is refused, never read through.
        std::os::unix::fs::symlink("/proc/self/environ", layout.outputs()).unwrap();
        let err = read_outputs(root.path(), "u1").await.unwrap_err();
        assert_eq!(err.reason(), outputs::OUTPUTS_INVALID);
        assert!(err.to_string().contains("symbolic link"), "{err}");
        remove(root.path(), "u1");
        // Gone from its place at once; what was set aside goes in the background.
        assert!(!root.path().join("u1").exists());
        let aside = || {
            std::fs::read_dir(root.path())
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(REMOVING))
        };
        for _ in 0..500 {
            if !aside() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the directory set aside was never removed");
    }

    #[tokio::test]
    async fn a_run_directory_replaced_by_a_link_is_removed_as_a_link() {
        let root = tempfile::tempdir().unwrap();
        let precious = root.path().join("precious");
        std::fs::create_dir(&precious).unwrap();
        std::fs::write(precious.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&precious, root.path().join("u1")).unwrap();
        // A link left aside by an earlier runtimed too.
        let left = root.path().join(format!("{REMOVING}u0-1-0"));
        std::os::unix::fs::symlink(&precious, &left).unwrap();
        remove(root.path(), "u1");
        remove_set_aside(root.path());
        for _ in 0..500 {
            let names: Vec<String> = std::fs::read_dir(root.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if names == ["precious"] {
                assert!(
                    precious.join("keep").exists(),
                    "the link's target was emptied"
                );
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the links were never removed");
    }

    #[test]
    fn only_uid_directories_of_runs_no_longer_here_are_stale() {
        let root = tempfile::tempdir().unwrap();
        let kept = "3a43d05a-ced4-4bd4-bbaa-296af477ddf7";
        let gone = "4c3db69a-f817-4915-8241-c51be0570eb5";
        for dir in [kept, gone, "persistent", ".kruntimes", "not-a-uid-at-all-x"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        // A file named like a UID is not a Run directory.
        std::fs::write(root.path().join("9c3db69a-f817-4915-8241-c51be0570eb5"), "").unwrap();
        let live = [kept.to_string()].into();
        assert_eq!(stale(root.path(), &live), [gone]);
    }
}
