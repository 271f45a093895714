//! The data-dir lock of `dev`: one running instance per data directory.
//!
//! An exclusive `flock` on `DIR/dev.lock`, held as long as the process keeps the file open
//! (the kernel drops it when the process dies, however it dies), with the holder's pid written
//! into the file so a refused second instance can name it. The `flock` calls themselves
//! ([`try_flock`], [`flock`]) serve the control plane's build lock and the test cluster's too.

use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why the data directory could not be locked.
#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "another `kubectl kruntimes dev` (pid {pid}) is already running on {}; stop it (Ctrl-C) or pass --data-dir with another directory",
        dir.display()
    )]
    Busy { pid: String, dir: PathBuf },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Locks `dir` or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("dev.lock");
        let fail = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(fail)?;
        if !try_flock(&file).map_err(fail)? {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = match pid.trim() {
                "" => "unknown".to_string(),
                p => p.to_string(),
            };
            return Err(Error::Busy {
                pid,
                dir: dir.to_path_buf(),
            });
        }
        file.set_len(0).map_err(fail)?;
        file.rewind().map_err(fail)?;
        writeln!(file, "{}", std::process::id()).map_err(fail)?;
        Ok(DataDirLock { _file: file })
    }
}

/// Takes an exclusive `flock` on `file` without waiting; `Ok(false)` when another open file
/// description holds it. The lock lives as long as the file stays open.
pub fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Takes an exclusive `flock` on `file`, waiting while another open file description holds
/// it.
pub fn flock(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: as in `try_flock`.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_dir_is_refused_with_the_holders_pid() {
        let dir = std::env::temp_dir().join(format!("kruntimes-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let held = DataDirLock::acquire(&dir).unwrap();
        let err = DataDirLock::acquire(&dir).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "another `kubectl kruntimes dev` (pid {}) is already running on {}",
                std::process::id(),
                dir.display()
            )),
            "{err}"
        );
        drop(held);
        DataDirLock::acquire(&dir).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
