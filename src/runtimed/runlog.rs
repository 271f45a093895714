//! The execution logs of this Pod's Runs: each Run's stdout and stderr, line by line, in
//! `<state-dir>/logs/<run name>_<run uid>.log` on runtimed's own volume (which the Runtime
//! controller mounts in runtimed's container alone; `<workspace-root>/.kruntimes` for a
//! runtimed started by hand), so they survive a runtimed restart and outlive the Run's own
//! directory while the Pod lives;
//! served by `GET /logs/<run>` on runtimed's API port, which people reach through the gateway
//! (`kubectl kruntimes logs run/NAME`, the Run's `log` subresource), the only caller
//! [`super::callers`] lets in.
//!
//! Bounded: a log that grows over [`MAX_BYTES`] is rotated once (the older part kept as
//! `.log.1`), so a Run keeps at most twice that; the logs of at most [`MAX_LOGS`] Runs are
//! kept, the least recently written removed first. The directory may be one a task can
//! write (runtimed's own container, or the workspace), so every file here is opened through [`super::task_files`] (no link followed, a regular file
//! only), a request reads at most [`MAX_SERVED`] bytes from the end of a log however large a
//! task made it, by seeking, and never on the event loop. A `.done` file marks a log whose execution
//! ended, where a follower stops; the next attempt of a retried Run removes it and goes on
//! writing the same log.
//!
//! Owns these files and the route. The lines come from the executor (a child's output as it
//! is written) and the runtime server's results (an execution's output at its end). Never
//! talks to the API server.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};

use super::task_files;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// A log is rotated once it is larger than this.
pub const MAX_BYTES: u64 = 1 << 20;
/// The logs of at most this many Runs are kept.
pub const MAX_LOGS: usize = 256;
/// The most a request reads of a log before it follows it: what a Run keeps (both parts).
pub const MAX_SERVED: u64 = 2 * MAX_BYTES + 64 * 1024;
/// The most a follower reads at a time.
const FOLLOW_CHUNK: u64 = 256 * 1024;
/// The logs' directory below the workspace volume.
const LOGS_DIR: &str = "logs";
/// How often a follower looks for more.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Where this Pod's Run logs are.
#[derive(Debug, Clone)]
pub struct RunLogs {
    /// The workspace volume: every file is opened below it, following no link.
    root: PathBuf,
    dir: PathBuf,
}

/// One Run's log, open for writing; shared by the streams of one execution.
pub type SharedWriter = Arc<Mutex<LogWriter>>;

impl RunLogs {
    /// The logs kept under runtimed's state directory `root` (`--state-dir`).
    pub fn new(root: &Path) -> Self {
        RunLogs {
            root: root.to_path_buf(),
            dir: root.join(LOGS_DIR),
        }
    }

    fn path(&self, name: &str, uid: &str) -> PathBuf {
        self.dir.join(format!("{name}_{uid}.log"))
    }

    /// The writer of an execution of the Run `name` (`uid`): appends to its log, after the
    /// earlier attempts' lines. A log that cannot be written is logged once and skipped: the
    /// Run runs all the same.
    pub fn writer(&self, name: &str, uid: &str) -> SharedWriter {
        let path = self.path(name, uid);
        let _ = std::fs::remove_file(done_marker(&path));
        let file = std::fs::create_dir_all(&self.dir)
            .and_then(|()| open_append(&self.root, &path))
            .map_err(|e| {
                tracing::warn!(run = %name, "cannot write the log of Run {name} to {}: {e}", path.display());
            })
            .ok();
        let written = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        // The directory is one tasks can write: a million files there must not hold up the
        // agent, which asks for writers on its loop.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let logs = self.clone();
                drop(handle.spawn_blocking(move || logs.prune()));
            }
            Err(_) => self.prune(),
        }
        Arc::new(Mutex::new(LogWriter {
            root: self.root.clone(),
            path,
            file,
            written,
        }))
    }

    /// Every log, with when it was last written (none when the directory cannot be read).
    fn logs(&self) -> Vec<(std::time::SystemTime, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
            .collect()
    }

    /// Removes the least recently written logs beyond [`MAX_LOGS`].
    fn prune(&self) {
        let mut logs = self.logs();
        if logs.len() <= MAX_LOGS {
            return;
        }
        logs.sort();
        for (_, path) in &logs[..logs.len() - MAX_LOGS] {
            for file in [path.clone(), rotated(path), done_marker(path)] {
                let _ = std::fs::remove_file(file);
            }
        }
    }

    /// The newest log of the Run named `name` (a Run deleted and created again has a new UID).
    fn find(&self, name: &str) -> Option<PathBuf> {
        let prefix = format!("{name}_");
        self.logs()
            .into_iter()
            .filter(|(_, p)| {
                p.file_name()
                    .and_then(|f| f.to_str())
                    .and_then(|f| f.strip_prefix(&prefix))
                    // A UID has no `_`: `a_b`'s log is not `a`'s.
                    .is_some_and(|rest| !rest.contains('_'))
            })
            .max()
            .map(|(_, p)| p)
    }
}

/// An open log.
#[derive(Debug)]
pub struct LogWriter {
    root: PathBuf,
    path: PathBuf,
    file: Option<std::fs::File>,
    written: u64,
}

impl LogWriter {
    /// Appends one line (a newline is added).
    pub fn line(&mut self, line: &str) {
        if self.written > MAX_BYTES {
            self.rotate();
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        match file.write_all(&bytes) {
            Ok(()) => self.written += bytes.len() as u64,
            Err(e) => {
                tracing::warn!(
                    "cannot write to {}: {e}; the rest of this log is skipped",
                    self.path.display()
                );
                self.file = None;
            }
        }
    }

    /// Appends every line of `text`.
    pub fn text(&mut self, text: &str) {
        for line in text.lines() {
            self.line(line);
        }
    }

    /// The execution ended: a follower stops at the end of what is written.
    pub fn done(&mut self) {
        let marker = done_marker(&self.path);
        if let Ok(rel) = marker.strip_prefix(&self.root) {
            let _ = task_files::create_beneath(&self.root, rel, false);
        }
    }

    fn rotate(&mut self) {
        self.file = std::fs::rename(&self.path, rotated(&self.path))
            .and_then(|()| open_append(&self.root, &self.path))
            .map_err(|e| tracing::warn!("cannot rotate {}: {e}", self.path.display()))
            .ok();
        self.written = 0;
    }
}

/// Opens the log `path` (below `root`) for appending, following no link a task put there.
fn open_append(root: &Path, path: &Path) -> std::io::Result<std::fs::File> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| std::io::Error::other("a log outside the workspace volume"))?;
    task_files::create_beneath(root, rel, true).map_err(std::io::Error::other)
}

fn rotated(path: &Path) -> PathBuf {
    path.with_extension("log.1")
}

fn done_marker(path: &Path) -> PathBuf {
    path.with_extension("done")
}

/// `?follow=true&tailLines=N`, as the kubelet's container log endpoint takes them.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogQuery {
    #[serde(default)]
    pub follow: bool,
    pub tail_lines: Option<usize>,
}

/// The `/logs/<run>` route over `logs`.
pub fn routes(logs: RunLogs) -> Router {
    Router::new()
        .route("/logs/{run}", get(serve))
        .with_state(logs)
}

async fn serve(
    State(logs): State<RunLogs>,
    UrlPath(run): UrlPath<String>,
    Query(query): Query<LogQuery>,
) -> Response {
    let Some(path) = logs.find(&run) else {
        return (
            StatusCode::NOT_FOUND,
            format!("Run {run} has no log on this Runtime Pod (it has not run here, or its log was removed)\n"),
        )
            .into_response();
    };
    let root = logs.root.clone();
    let read = {
        let (root, path) = (root.clone(), path.clone());
        tokio::task::spawn_blocking(move || read_head(&root, &path, query.tail_lines))
    };
    let head = match read.await.map_err(std::io::Error::other).and_then(|r| r) {
        Ok(head) => head,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the log of Run {run}: {e}\n"),
            )
                .into_response();
        }
    };
    let body = match query.follow {
        false => Body::from(head.bytes),
        true => Body::from_stream(follow(root, path, head)),
    };
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// What a request reads first: the log's lines (the last `tail` of them, counting the rotated
/// part too), and how far into the current file that is.
struct Head {
    bytes: Vec<u8>,
    offset: u64,
}

/// The log's head: at most [`MAX_SERVED`] bytes, the end of the rotated part then of the
/// current file, each read from its end by seeking (a log a task made huge costs no more).
fn read_head(root: &Path, path: &Path, tail: Option<usize>) -> std::io::Result<Head> {
    let (current, offset) = read_end(root, path, MAX_SERVED)?;
    let budget = MAX_SERVED - current.len() as u64;
    let mut bytes = read_end(root, &rotated(path), budget)
        .map(|(b, _)| b)
        .unwrap_or_default();
    bytes.extend_from_slice(&current);
    if let Some(n) = tail {
        bytes = last_lines(&bytes, n).to_vec();
    }
    Ok(Head { bytes, offset })
}

/// The last `budget` bytes of the regular file `path` below `root`, and its size.
fn read_end(root: &Path, path: &Path, budget: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let task_files::Regular { mut file, size } = open_log(root, path)?;
    let start = size.saturating_sub(budget);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(size - start).read_to_end(&mut bytes)?;
    Ok((bytes, size))
}

/// The log `path` below `root`, opened following no link, a regular file only.
fn open_log(root: &Path, path: &Path) -> std::io::Result<task_files::Regular> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| std::io::Error::other("a log outside the workspace volume"))?;
    task_files::open_regular(root, rel, u64::MAX).map_err(|e| match e {
        task_files::FileError::Missing { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string())
        }
        other => std::io::Error::other(other.to_string()),
    })
}

/// The last `n` lines of `bytes` (a final line without a newline counts).
fn last_lines(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let start = body
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map_or(0, |(i, _)| i + 1);
    &bytes[start..]
}

/// The head, then whatever is appended, until the execution is done and all of it is sent
/// (or the client goes away, which drops this stream).
fn follow(
    root: PathBuf,
    path: PathBuf,
    head: Head,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    follow_waiting(root, path, head, || {})
}

/// [`follow`], calling `waiting` each time it found nothing new while the execution is not
/// done, before it looks again (a test awaits that instead of guessing how long it takes).
fn follow_waiting(
    root: PathBuf,
    path: PathBuf,
    head: Head,
    waiting: impl Fn() + Clone + Send + Sync + 'static,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    futures::stream::unfold(
        (path, Some(head.bytes), head.offset, false),
        move |(path, first, offset, finished)| {
            let root = root.clone();
            let waiting = waiting.clone();
            async move {
                if let Some(bytes) = first {
                    return Some((Ok(bytes), (path, None, offset, false)));
                }
                if finished {
                    return None;
                }
                loop {
                    // Read the marker before the file: lines written before it are then read.
                    let more = {
                        let (root, path) = (root.clone(), path.clone());
                        tokio::task::spawn_blocking(move || {
                            // Whatever is there, a link a task made too: a dangling
                            // one must not keep a follower waiting forever.
                            let done = std::fs::symlink_metadata(done_marker(&path)).is_ok();
                            (done, read_from(&root, &path, offset))
                        })
                        .await
                    };
                    match more {
                        Ok((_, Ok((bytes, next)))) if !bytes.is_empty() => {
                            return Some((Ok(bytes), (path, None, next, false)));
                        }
                        Ok((true, Ok(_))) => return None,
                        Ok((false, Ok(_))) => {
                            waiting();
                            tokio::time::sleep(FOLLOW_EVERY).await;
                        }
                        Ok((_, Err(e))) => return Some((Err(e), (path, None, offset, true))),
                        Err(join) => {
                            let e = std::io::Error::other(join);
                            return Some((Err(e), (path, None, offset, true)));
                        }
                    }
                }
            }
        },
    )
}

/// What was appended to `path` since `offset` (from the start when the log was rotated), at
/// most [`FOLLOW_CHUNK`] bytes, and the offset after it.
fn read_from(root: &Path, path: &Path, offset: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let task_files::Regular { mut file, size } = open_log(root, path)?;
    let offset = if size < offset { 0 } else { offset };
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(FOLLOW_CHUNK).read_to_end(&mut bytes)?;
    let next = offset + bytes.len() as u64;
    Ok((bytes, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_counts_lines_from_the_end() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
    }

    #[test]
    fn a_run_keeps_its_lines_across_attempts_and_rotation_bounds_it() {
        let root = tempfile::tempdir().unwrap();
        let logs = RunLogs::new(root.path());
        let w = logs.writer("job", "u1");
        w.lock().unwrap().line("attempt 1");
        w.lock().unwrap().done();
        let path = logs.find("job").unwrap();
        assert!(done_marker(&path).exists());
        // The next attempt goes on in the same log, no longer done.
        let w = logs.writer("job", "u1");
        assert!(!done_marker(&path).exists());
        w.lock().unwrap().text("attempt 2\nline 2\n");
        let head = read_head(root.path(), &path, None).unwrap();
        assert_eq!(head.bytes, b"attempt 1\nattempt 2\nline 2\n");
        assert_eq!(
            read_head(root.path(), &path, Some(1)).unwrap().bytes,
            b"line 2\n"
        );
        // Another Run whose name starts the same is not this one.
        logs.writer("job_x", "u2").lock().unwrap().line("other");
        assert_eq!(logs.find("job"), Some(path.clone()));

        let line = "x".repeat(1023);
        for _ in 0..(2 * MAX_BYTES / 1024 + 8) {
            w.lock().unwrap().line(&line);
        }
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        assert!(size(&path) <= MAX_BYTES + 1024, "{}", size(&path));
        assert!(size(&rotated(&path)) <= MAX_BYTES + 1024);
        assert!(size(&rotated(&path)) > 0, "rotated once");
    }

    #[test]
    fn a_log_a_task_made_huge_or_linked_is_read_from_its_end_or_refused() {
        let root = tempfile::tempdir().unwrap();
        let logs = RunLogs::new(root.path());
        logs.writer("job", "u1").lock().unwrap().line("first");
        let path = logs.find("job").unwrap();
        // `truncate -s 100G` on the log: the head is its last MAX_SERVED bytes, read by
        // seeking (all zeros here), not 100 GiB in memory.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100 << 30)
            .unwrap();
        let head = read_head(root.path(), &path, None).unwrap();
        assert_eq!(head.bytes.len() as u64, MAX_SERVED);
        assert_eq!(head.offset, 100 << 30);
        // A link in the log's place is never read through, nor written through.
        let secret = root.path().join("secret");
        std::fs::write(&secret, "KEY=hunter2\n").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&secret, &path).unwrap();
        assert!(read_head(root.path(), &path, None).is_err());
        let w = logs.writer("job", "u1");
        w.lock().unwrap().line("through the link?");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "KEY=hunter2\n");
        // Nor is the `.done` marker, linked to another file.
        std::os::unix::fs::symlink(&secret, done_marker(&path)).unwrap();
        w.lock().unwrap().done();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "KEY=hunter2\n");
    }

    #[tokio::test]
    async fn a_follower_gets_what_is_appended_and_stops_when_done() {
        use futures::StreamExt as _;
        let root = tempfile::tempdir().unwrap();
        let logs = RunLogs::new(root.path());
        let w = logs.writer("job", "u1");
        w.lock().unwrap().line("one");
        let path = logs.find("job").unwrap();
        let head = read_head(root.path(), &path, None).unwrap();
        let writer = w.clone();
        let base = root.path().to_path_buf();
        let waits = Arc::new(tokio::sync::Notify::new());
        let waited = waits.clone();
        let task = tokio::spawn(async move {
            follow_waiting(base, path, head, move || waited.notify_one())
                .map(|chunk| chunk.unwrap())
                .concat()
                .await
        });
        // Appended only once the follower has looked past the head and found nothing: it
        // gets the line by looking again. (The time limits only fail the test.)
        let patience = Duration::from_secs(30);
        tokio::time::timeout(patience, waits.notified())
            .await
            .expect("the follower never waited for more");
        writer.lock().unwrap().line("two");
        writer.lock().unwrap().done();
        let followed = tokio::time::timeout(patience, task)
            .await
            .expect("the follower did not stop once the execution was done");
        assert_eq!(followed.unwrap(), b"one\ntwo\n");
    }
}
