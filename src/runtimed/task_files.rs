//! Files a task can write, opened without trusting the task: the one way runtimed reads what
//! an execution left on a task-writable volume (`$KRUNTIME_OUTPUTS`, the artifacts) and
//! writes its own marks there.
//!
//! Every path is resolved below a directory handle, component by component, never through a
//! symbolic link (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or `openat` with
//! `O_NOFOLLOW` on each component where the kernel lacks `openat2`), and opened with
//! `O_NONBLOCK`, so a FIFO a task left in the file's place answers at once instead of
//! stalling the reader. What is read must be a regular file; its size is taken from the same
//! descriptor (`fstat`) before a byte is read, and the caller reads and hashes that descriptor,
//! never the path again, so the file cannot be swapped between the check and the use.
//!
//! Blocking: the agent calls [`read_regular_off_loop`], which reads on the blocking pool with
//! a deadline, never on its event loop. Owns no path policy (which files a Run has is
//! [`super::rundir`]'s) and never talks to the API server.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use thiserror::Error;

/// Why a task-writable file cannot be used.
#[derive(Debug, Error)]
pub enum FileError {
    /// The path names no file.
    #[error("{path} does not exist")]
    Missing { path: String },
    /// A symbolic link is on the way, or is the file: runtimed follows none.
    #[error("{path} is or passes through a symbolic link; runtimed follows no link a task made")]
    Link { path: String },
    /// A FIFO, socket, device or directory where a regular file was expected.
    #[error("{path} is a {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    /// Larger than the caller reads.
    #[error("{path} holds {size} bytes, more than the {limit} runtimed reads")]
    TooLarge { path: String, size: u64, limit: u64 },
    /// The read did not finish within its deadline (a file system that hangs).
    #[error("reading {path} took longer than {deadline:?}")]
    TimedOut { path: String, deadline: Duration },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl FileError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        FileError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// A regular file opened below a directory, with the size its descriptor reported.
#[derive(Debug)]
pub struct Regular {
    pub file: File,
    pub size: u64,
}

/// Opens `rel` below the directory `root` for reading without following any link, and checks
/// through the descriptor that it is a regular file of at most `limit` bytes.
pub fn open_regular(root: &Path, rel: &Path, limit: u64) -> Result<Regular, FileError> {
    let shown = root.join(rel);
    let fd = open_beneath(
        root,
        rel,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| classify(&shown, e))?;
    let file = regular(&shown, fd)?;
    let size = file.metadata().map_err(|e| FileError::io(&shown, e))?.len();
    if size > limit {
        return Err(FileError::TooLarge {
            path: shown.display().to_string(),
            size,
            limit,
        });
    }
    Ok(Regular { file, size })
}

/// The bytes of the regular file `rel` below `root`, at most `limit` of them (a file that
/// grows past `limit` while it is read is too large too). `None` when there is no such file.
pub fn read_regular(root: &Path, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, FileError> {
    let shown = root.join(rel);
    let Regular { file, size } = match open_regular(root, rel, limit) {
        Err(FileError::Missing { .. }) => return Ok(None),
        other => other?,
    };
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(&shown, e))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: shown.display().to_string(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(Some(bytes))
}

/// [`read_regular`] on the blocking pool, given up after `deadline`: what a task left can
/// never hold up the caller's event loop.
pub async fn read_regular_off_loop(
    root: PathBuf,
    rel: PathBuf,
    limit: u64,
    deadline: Duration,
) -> Result<Option<Vec<u8>>, FileError> {
    let shown = root.join(&rel);
    let read = tokio::task::spawn_blocking(move || read_regular(&root, &rel, limit));
    match tokio::time::timeout(deadline, read).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(FileError::io(&shown, std::io::Error::other(join))),
        Err(_) => Err(FileError::TimedOut {
            path: shown.display().to_string(),
            deadline,
        }),
    }
}

/// Creates or truncates (or with `append`, appends to) the regular file `rel` below `root`,
/// following no link: a link a task put in its place is refused, not written through.
pub fn create_beneath(root: &Path, rel: &Path, append: bool) -> Result<File, FileError> {
    let shown = root.join(rel);
    let mut flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NONBLOCK | OFlags::CLOEXEC;
    flags |= if append {
        OFlags::APPEND
    } else {
        OFlags::TRUNC
    };
    let fd = open_beneath(root, rel, flags, Mode::from_raw_mode(0o644))
        .map_err(|e| classify(&shown, e))?;
    regular(&shown, fd)
}

/// A directory below a root, opened following no link and held open: [`Self::path`] names
/// that very directory (`/proc/self/fd/<n>`) whatever is renamed or linked in its place
/// meanwhile.
#[derive(Debug)]
pub struct PinnedDir {
    fd: OwnedFd,
}

impl PinnedDir {
    /// A path that reaches the pinned directory itself.
    pub fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd as _;
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// Opens the directory `rel` below `root`, following no link; `None` when there is none.
pub fn pin_dir(root: &Path, rel: &Path) -> Result<Option<PinnedDir>, FileError> {
    let shown = root.join(rel);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match open_beneath(root, rel, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(PinnedDir { fd })),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(rustix::io::Errno::NOTDIR) => Err(FileError::NotRegular {
            path: shown.display().to_string(),
            kind: "link or file, not a directory",
        }),
        Err(e) => Err(classify(&shown, e)),
    }
}

/// The descriptor as a [`File`], if it is a regular file.
fn regular(shown: &Path, fd: OwnedFd) -> Result<File, FileError> {
    let stat = rustix::fs::fstat(&fd).map_err(|e| FileError::io(shown, e.into()))?;
    let kind = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
        rustix::fs::FileType::RegularFile => return Ok(File::from(fd)),
        rustix::fs::FileType::Directory => "directory",
        rustix::fs::FileType::Fifo => "FIFO",
        rustix::fs::FileType::Socket => "socket",
        rustix::fs::FileType::CharacterDevice | rustix::fs::FileType::BlockDevice => "device",
        _ => "special file",
    };
    Err(FileError::NotRegular {
        path: shown.display().to_string(),
        kind,
    })
}

fn classify(shown: &Path, e: rustix::io::Errno) -> FileError {
    let path = shown.display().to_string();
    match e {
        rustix::io::Errno::NOENT => FileError::Missing { path },
        // ELOOP: O_NOFOLLOW met a link; EXDEV: RESOLVE_BENEATH refused an escape.
        rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => FileError::Link { path },
        // ENOTDIR: a component is a link (opened O_NOFOLLOW|O_DIRECTORY) or a file.
        rustix::io::Errno::NOTDIR => FileError::Link { path },
        // ENXIO: a socket or a FIFO without a reader opened for writing.
        rustix::io::Errno::NXIO => FileError::NotRegular {
            path,
            kind: "FIFO or socket",
        },
        other => FileError::Io {
            path,
            source: other.into(),
        },
    }
}

/// Opens `rel` (relative, only normal components) below the directory `root` with `flags`,
/// resolving no symbolic link anywhere below `root`.
fn open_beneath(
    root: &Path,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, rustix::io::Errno> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(part) => Ok(part),
            _ => Err(rustix::io::Errno::XDEV),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(rustix::io::Errno::INVAL);
    };
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(&dir, rel, flags | OFlags::NOFOLLOW, mode, resolve) {
        // Kernels before 5.6, or a seccomp profile that refuses openat2: one component at a
        // time, each opened O_NOFOLLOW (a directory with O_DIRECTORY too).
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {}
        other => return other,
    }
    let mut dir = dir;
    for part in dirs {
        dir = rustix::fs::openat(
            &dir,
            *part,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
    }
    rustix::fs::openat(&dir, *last, flags | OFlags::NOFOLLOW, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("run")).unwrap();
        root
    }

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_none() {
        let root = root();
        std::fs::write(root.path().join("run/outputs"), "a=1\n").unwrap();
        let got = read_regular(root.path(), Path::new("run/outputs"), 100).unwrap();
        assert_eq!(got.as_deref(), Some(&b"a=1\n"[..]));
        assert!(
            read_regular(root.path(), Path::new("run/none"), 100)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_link_as_the_file_or_on_the_way_is_refused_not_followed() {
        let root = root();
        let secret = root.path().join("secret");
        std::fs::write(&secret, "KEY=hunter2\n").unwrap();
        symlink(&secret, root.path().join("run/outputs")).unwrap();
        let err = read_regular(root.path(), Path::new("run/outputs"), 100).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{err:?}");
        // A link to /proc/self/environ: runtimed's own environment.
        std::fs::remove_file(root.path().join("run/outputs")).unwrap();
        symlink("/proc/self/environ", root.path().join("run/outputs")).unwrap();
        let err = read_regular(root.path(), Path::new("run/outputs"), 100).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{err:?}");
        // The Run's directory itself replaced by a link.
        std::fs::create_dir(root.path().join("elsewhere")).unwrap();
        std::fs::write(root.path().join("elsewhere/outputs"), "x=1").unwrap();
        symlink(root.path().join("elsewhere"), root.path().join("run2")).unwrap();
        let err = read_regular(root.path(), Path::new("run2/outputs"), 100).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{err:?}");
        // Nor a write through one.
        let err = create_beneath(root.path(), Path::new("run/outputs"), false).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{err:?}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "KEY=hunter2\n");
        // `..` never leaves the root.
        let err = read_regular(root.path(), Path::new("run/../secret"), 100).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{err:?}");
    }

    #[test]
    fn a_fifo_answers_at_once_as_not_regular() {
        let root = root();
        let fifo = root.path().join("run/outputs");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // No writer ever opens it: a blocking open would never return.
        let err = read_regular(root.path(), Path::new("run/outputs"), 100).unwrap_err();
        assert!(
            matches!(err, FileError::NotRegular { kind: "FIFO", .. }),
            "{err:?}"
        );
        let err = create_beneath(root.path(), Path::new("run/outputs"), true).unwrap_err();
        assert!(matches!(err, FileError::NotRegular { .. }), "{err:?}");
    }

    #[test]
    fn a_huge_sparse_file_is_too_large_before_a_byte_is_read() {
        let root = root();
        let file = File::create(root.path().join("run/outputs")).unwrap();
        file.set_len(10 << 30).unwrap();
        let err = read_regular(root.path(), Path::new("run/outputs"), 1 << 20).unwrap_err();
        assert!(
            matches!(err, FileError::TooLarge { size, .. } if size == 10 << 30),
            "{err:?}"
        );
    }

    #[test]
    fn a_pinned_directory_stays_itself_and_a_linked_one_is_refused() {
        let root = root();
        std::fs::write(root.path().join("run/a"), "mine").unwrap();
        let pinned = pin_dir(root.path(), Path::new("run")).unwrap().unwrap();
        // Swapped for a link to another directory after it was pinned.
        std::fs::create_dir(root.path().join("other")).unwrap();
        std::fs::write(root.path().join("other/a"), "theirs").unwrap();
        std::fs::rename(root.path().join("run"), root.path().join("moved")).unwrap();
        symlink(root.path().join("other"), root.path().join("run")).unwrap();
        let read = std::fs::read_to_string(pinned.path().join("a")).unwrap();
        assert_eq!(read, "mine");
        let err = pin_dir(root.path(), Path::new("run")).unwrap_err();
        assert!(matches!(err, FileError::NotRegular { .. }), "{err:?}");
        assert!(pin_dir(root.path(), Path::new("none")).unwrap().is_none());
    }

    #[tokio::test]
    async fn the_off_loop_read_reads_what_the_blocking_one_does() {
        let root = root();
        std::fs::write(root.path().join("run/outputs"), "k=v").unwrap();
        let got = read_regular_off_loop(
            root.path().to_path_buf(),
            "run/outputs".into(),
            10,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(got.as_deref(), Some(&b"k=v"[..]));
    }
}
