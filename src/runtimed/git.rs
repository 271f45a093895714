//! A Run's Git source (`spec.source.repoURL`, `spec.source.commitSHA`): the commit checked out
//! into `<run dir>/repo` before the execution, by runtimed itself (gix: a Runtime Pod's image
//! need not have `git`), bounded in time and size.
//!
//! [`check_url`] and [`check_commit`] are pure (the rules `executor::prepare` applies before a
//! Run is claimed); [`checkout`] is blocking I/O, run on a blocking thread by the child that
//! fetches before it starts. Never talks to the API server or the runtime server.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::client::blocking_io::http;

/// The directory of the Run's directory the commit is checked out into (the working
/// directory then), as the Go project names it.
pub const CHECKOUT_DIR: &str = "repo";

/// What a Git source fetches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GitSource {
    pub url: String,
    /// A full commit ID (then only that commit is fetched), or anything else `git checkout`
    /// takes (an abbreviated ID, a branch or tag: then the whole history is); `None` is the
    /// remote's default branch.
    pub commit: Option<String>,
}

/// The bounds and trust of a fetch (runtimed's flags).
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// The whole fetch and checkout; then it is interrupted.
    pub timeout: Duration,
    /// Bytes of the checkout, `.git` included.
    pub max_bytes: u64,
    /// PEM certificates trusted besides the built-in and the system's roots (a Git server
    /// with a private CA).
    pub ca_file: Option<PathBuf>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            timeout: Duration::from_secs(60),
            max_bytes: 100 << 20,
            ca_file: None,
        }
    }
}

/// Whether `url` is one runtimed fetches: `https://`, `ssh://` or scp-like `git@host:path`,
/// as the Go project allows; never plain `http://`, `git://` or a local path.
pub fn check_url(url: &str) -> bool {
    if let Some(rest) = url.strip_prefix("git@") {
        return rest.split_once(':').is_some_and(|(host, path)| {
            !host.is_empty() && !path.is_empty() && !host.contains('/')
        });
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    matches!(scheme, "https" | "ssh") && rest.split('/').next().is_some_and(|h| !h.is_empty())
}

/// Why a checkout failed: the Run's `StartFailed` message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GitError {
    #[error("spec.source.repoURL {url:?}: cannot fetch: {error}")]
    Fetch { url: String, error: String },
    #[error("spec.source.commitSHA {commit:?} is not a commit of {url:?}: {error}")]
    Commit {
        url: String,
        commit: String,
        error: String,
    },
    #[error("spec.source.repoURL {url:?}: the fetch and checkout took longer than {timeout:?}")]
    TimedOut { url: String, timeout: Duration },
    #[error(
        "spec.source.repoURL {url:?}: the checkout is larger than the limit of {limit} bytes (runtimed --git-max-bytes)"
    )]
    TooLarge { url: String, limit: u64 },
    #[error("cannot prepare {dir}: {error}")]
    Dir { dir: String, error: String },
    #[error("runtimed --git-ca-file {file}: {error}")]
    CaFile { file: String, error: String },
}

/// Fetches `source` and checks it out into `dest` (removed first: each attempt starts from the
/// commit as it is). Blocking; gives up when `interrupt` is set (the Run was stopped) or the
/// timeout passes.
pub fn checkout(
    source: &GitSource,
    dest: &Path,
    options: &FetchOptions,
    interrupt: &Arc<AtomicBool>,
) -> Result<(), GitError> {
    let url = source.url.clone();
    let dir_error = |e: std::io::Error| GitError::Dir {
        dir: dest.display().to_string(),
        error: e.to_string(),
    };
    match std::fs::remove_dir_all(dest) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(dir_error(e)),
        _ => {}
    }
    let tls = tls_config(options.ca_file.as_deref())?;
    let timed_out = Arc::new(AtomicBool::new(false));
    let too_large = Arc::new(AtomicBool::new(false));
    let _watchdog = Watchdog::start(
        options,
        dest.to_path_buf(),
        interrupt.clone(),
        timed_out.clone(),
        too_large.clone(),
    );
    let fetch_error = |error: gix::Error| GitError::Fetch {
        url: url.clone(),
        error: chain(&error),
    };
    let full_id = source
        .commit
        .as_deref()
        .filter(|c| c.len() == 40 || c.len() == 64);
    let mut prepare = gix::prepare_clone(source.url.as_str(), dest).map_err(fetch_error)?;
    // The default branch or a full commit ID: only that commit (the Go project clones the
    // whole history). An abbreviated ID is found in the whole history.
    if source.commit.is_none() || full_id.is_some() {
        prepare = prepare.with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(NonZeroU32::MIN));
    }
    if let Some(id) = full_id {
        prepare = prepare
            .with_revision(Some(id))
            .map_err(|e| commit_error(source, e.to_string()))?;
    }
    let timeout = options.timeout;
    prepare = prepare.configure_connection(move |connection| {
        connection.set_transport_options(Box::new(transport_options(tls.clone(), timeout)));
        Ok(())
    });
    let max_bytes = options.max_bytes;
    let stopped = |e: GitError| {
        if too_large.load(Ordering::SeqCst) {
            return GitError::TooLarge {
                url: url.clone(),
                limit: max_bytes,
            };
        }
        match timed_out.load(Ordering::SeqCst) {
            true => GitError::TimedOut {
                url: url.clone(),
                timeout,
            },
            false => e,
        }
    };
    let received = PackBytes::new(max_bytes, interrupt.clone(), too_large.clone());
    let (mut checkout, _) = prepare
        .fetch_then_checkout(received, interrupt)
        .map_err(|e| match full_id {
            Some(_) if !interrupt.load(Ordering::SeqCst) => commit_error(source, chain(&e)),
            _ => stopped(fetch_error(e)),
        })?;
    if let Some(commit) = source.commit.as_deref().filter(|_| full_id.is_none()) {
        detach_head(checkout.repo(), commit).map_err(|e| commit_error(source, e))?;
    }
    checkout
        .main_worktree(gix::progress::Discard, interrupt)
        .map_err(|e| stopped(fetch_error(e)))?;
    if interrupt.load(Ordering::SeqCst) {
        return Err(stopped(GitError::Fetch {
            url: url.clone(),
            error: "interrupted".into(),
        }));
    }
    if size_of(dest).map_err(dir_error)? > options.max_bytes {
        return Err(GitError::TooLarge {
            url,
            limit: options.max_bytes,
        });
    }
    Ok(())
}

/// [`checkout`] on a blocking thread; dropping the future interrupts it (the Run was stopped).
pub async fn fetch(
    source: GitSource,
    dest: PathBuf,
    options: FetchOptions,
) -> Result<(), GitError> {
    struct InterruptOnDrop(Arc<AtomicBool>);
    impl Drop for InterruptOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    let _guard = InterruptOnDrop(interrupt.clone());
    let url = source.url.clone();
    tokio::task::spawn_blocking(move || checkout(&source, &dest, &options, &interrupt))
        .await
        .unwrap_or_else(|e| {
            Err(GitError::Fetch {
                url,
                error: format!("the fetch did not finish: {e}"),
            })
        })
}

/// An error and its causes, as one line: a TLS or HTTP failure is told by its cause.
fn chain(error: &gix::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

fn commit_error(source: &GitSource, error: String) -> GitError {
    GitError::Commit {
        url: source.url.clone(),
        commit: source.commit.clone().unwrap_or_default(),
        error,
    }
}

/// Points `HEAD` at the commit `commit` names (an abbreviated ID, a tag, or a branch of the
/// remote), so the checkout is of it.
fn detach_head(repo: &gix::Repository, commit: &str) -> Result<(), String> {
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit};
    let found = |spec: String| {
        repo.rev_parse_single(format!("{spec}^{{commit}}").as_str())
            .map(|id| id.detach())
    };
    let id = found(commit.to_string())
        .or_else(|e| found(format!("origin/{commit}")).map_err(|_| e))
        .map_err(|e| e.to_string())?;
    repo.edit_reference(RefEdit {
        change: Change::Update {
            log: LogChange::default(),
            expected: PreviousValue::Any,
            new: gix::refs::Target::Object(id),
        },
        name: "HEAD"
            .try_into()
            .map_err(|e: gix::validate::reference::name::Error| e.to_string())?,
        deref: false,
    })
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// The HTTP transport: reqwest on rustls (ring), trusting Mozilla's roots, the system's and
/// `--git-ca-file`'s, each request bounded just past the fetch's timeout. Redirects are gix's
/// own policy, which it installs over any of ours: it never follows one that lowers the scheme
/// (https to http), nor one that changes the host unless the path's tail stays the same.
fn transport_options(tls: rustls::ClientConfig, timeout: Duration) -> http::Options {
    let backend = http::reqwest::Options {
        configure_client: Some(Box::new(
            move |builder: reqwest::blocking::ClientBuilder| {
                // A little past the fetch's own timeout, so that a stalled request ends after the
                // timer has marked the fetch timed out (gix checks the interrupt only between
                // reads).
                Ok(builder
                    .tls_backend_preconfigured(tls.clone())
                    .timeout(timeout + Duration::from_secs(2)))
            },
        )),
        configure_request: None,
    };
    http::Options {
        backend: Some(Arc::new(Mutex::new(backend))),
        ..Default::default()
    }
}

fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, GitError> {
    super::tls::client_config(ca_file).map_err(|error| GitError::CaFile {
        file: ca_file.map(|f| f.display().to_string()).unwrap_or_default(),
        error,
    })
}

/// Bytes of the regular files under `dir`.
fn size_of(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += size_of(&entry.path())?;
        } else if kind.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// gix's id of the progress that counts the bytes of a pack as they are read from the
/// connection (`gix_pack::bundle::write::ProgressId::ReadPackBytes`).
const READ_PACK_BYTES: gix::progress::Id = *b"BWRB";

/// A progress for the fetch that counts the bytes of the pack read from the connection, at
/// every read, and sets `interrupt` and `too_large` once they pass `max_bytes`: gix checks
/// the interrupt on the next read, so the download stops within a read of the bound. Every
/// other progress is discarded.
#[derive(Clone)]
struct PackBytes {
    id: gix::progress::Id,
    read: gix::progress::StepShared,
    max_bytes: u64,
    interrupt: Arc<AtomicBool>,
    too_large: Arc<AtomicBool>,
}

impl PackBytes {
    fn new(max_bytes: u64, interrupt: Arc<AtomicBool>, too_large: Arc<AtomicBool>) -> Self {
        PackBytes {
            id: gix::progress::UNKNOWN,
            read: Default::default(),
            max_bytes,
            interrupt,
            too_large,
        }
    }
}

impl gix::progress::Count for PackBytes {
    fn set(&self, step: gix::progress::Step) {
        self.read.store(step, Ordering::Relaxed);
        self.check();
    }

    fn step(&self) -> gix::progress::Step {
        self.read.load(Ordering::Relaxed)
    }

    fn inc_by(&self, step: gix::progress::Step) {
        self.read.fetch_add(step, Ordering::Relaxed);
        self.check();
    }

    fn counter(&self) -> gix::progress::StepShared {
        self.read.clone()
    }
}

impl PackBytes {
    fn check(&self) {
        if self.id == READ_PACK_BYTES && self.read.load(Ordering::Relaxed) as u64 > self.max_bytes {
            self.too_large.store(true, Ordering::SeqCst);
            self.interrupt.store(true, Ordering::SeqCst);
        }
    }
}

impl gix::progress::Progress for PackBytes {
    fn init(&mut self, _max: Option<gix::progress::Step>, _unit: Option<gix::progress::Unit>) {}

    fn set_name(&mut self, _name: String) {}

    fn name(&self) -> Option<String> {
        None
    }

    fn id(&self) -> gix::progress::Id {
        self.id
    }

    fn message(&self, _level: gix::progress::MessageLevel, _message: String) {}
}

impl gix::progress::NestedProgress for PackBytes {
    type SubProgress = PackBytes;

    fn add_child(&mut self, name: impl Into<String>) -> Self::SubProgress {
        self.add_child_with_id(name, gix::progress::UNKNOWN)
    }

    /// Each child counts on its own: only the one gix reads the pack through is bounded.
    fn add_child_with_id(
        &mut self,
        _name: impl Into<String>,
        id: gix::progress::Id,
    ) -> Self::SubProgress {
        PackBytes {
            id,
            read: Default::default(),
            ..self.clone()
        }
    }
}

/// How often the watchdog measures what a fetch has written. The pack's bytes are bounded at
/// every read by [`PackBytes`]; this walk of the tree bounds what the checkout writes, and a
/// walk of a large checkout is not free on runtimed's CPU limit.
const MEASURE_EVERY: Duration = Duration::from_millis(250);

/// Bounds a fetch while it runs, until dropped: sets `interrupt` and `too_large` as soon as
/// what it wrote below `dest` (the pack as it arrives, then the checkout) is larger than
/// `--git-max-bytes`, measured every [`MEASURE_EVERY`], and `interrupt` and `timed_out` once
/// the timeout has passed. gix checks the interrupt on every read of the pack, so a fetch is
/// stopped within a read of the limit, not after it has downloaded everything.
struct Watchdog {
    done: Option<std::sync::mpsc::Sender<()>>,
}

impl Watchdog {
    fn start(
        options: &FetchOptions,
        dest: PathBuf,
        interrupt: Arc<AtomicBool>,
        timed_out: Arc<AtomicBool>,
        too_large: Arc<AtomicBool>,
    ) -> Self {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (timeout, max_bytes) = (options.timeout, options.max_bytes);
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match wait.recv_timeout(left.min(MEASURE_EVERY)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    // Dropped: the fetch is over.
                    _ => return,
                }
                if size_of(&dest).unwrap_or(0) > max_bytes {
                    too_large.store(true, Ordering::SeqCst);
                    interrupt.store(true, Ordering::SeqCst);
                    return;
                }
                if left <= MEASURE_EVERY {
                    timed_out.store(true, Ordering::SeqCst);
                    interrupt.store(true, Ordering::SeqCst);
                    return;
                }
            }
        });
        Watchdog { done: Some(done) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_ssh_and_scp_like_urls_are_fetched() {
        for ok in [
            "https://github.com/o/r.git",
            "ssh://git@host/o/r.git",
            "git@github.com:o/r.git",
        ] {
            assert!(check_url(ok), "{ok}");
        }
        for refused in [
            "http://host/r.git",
            "git://host/r.git",
            "file:///tmp/r",
            "/tmp/r",
            "https://",
            "git@:r",
            "git@host",
            "",
        ] {
            assert!(!check_url(refused), "{refused}");
        }
    }

    #[test]
    fn the_size_counts_every_file_below() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), [0u8; 10]).unwrap();
        std::fs::write(dir.path().join("g"), [0u8; 5]).unwrap();
        assert_eq!(size_of(dir.path()).unwrap(), 15);
    }

    #[test]
    fn an_unreadable_ca_file_is_named() {
        let err = tls_config(Some(Path::new("/nonexistent/ca.pem"))).unwrap_err();
        assert!(matches!(err, GitError::CaFile { .. }), "{err}");
    }
}
