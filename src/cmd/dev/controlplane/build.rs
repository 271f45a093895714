//! Building kube-apiserver, etcd and kubectl from Go modules through the embedded recipe
//! (`tests/controlplane/`), into a cache outside any repository keyed by version; one build
//! at a time across processes (a lock file in the cache root).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Error, Result, io};
use crate::cmd::dev::lock::{flock, try_flock};

/// The Kubernetes release the recipe builds (kube-apiserver and kubectl).
pub const K8S_VERSION: &str = "v1.36.3";
/// The etcd release the recipe builds.
pub const ETCD_VERSION: &str = "v3.6.16";

/// The build recipe, embedded: (path relative to the recipe root, contents).
const RECIPE: &[(&str, &str)] = &[
    (
        "build.sh",
        include_str!("../../../../tests/controlplane/build.sh"),
    ),
    (
        "apiserver/go.mod",
        include_str!("../../../../tests/controlplane/apiserver/go.mod"),
    ),
    (
        "apiserver/go.sum",
        include_str!("../../../../tests/controlplane/apiserver/go.sum"),
    ),
    (
        "apiserver/tools.go",
        include_str!("../../../../tests/controlplane/apiserver/tools.go"),
    ),
    (
        "etcd/go.mod",
        include_str!("../../../../tests/controlplane/etcd/go.mod"),
    ),
    (
        "etcd/go.sum",
        include_str!("../../../../tests/controlplane/etcd/go.sum"),
    ),
    (
        "etcd/tools.go",
        include_str!("../../../../tests/controlplane/etcd/tools.go"),
    ),
];

/// Root of the binary cache: `$KRUNTIMES_CONTROLPLANE_CACHE`, else
/// `$XDG_CACHE_HOME/kruntimes/controlplane`, else `~/.cache/kruntimes/controlplane` (the
/// same rule as `build.sh`).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KRUNTIMES_CONTROLPLANE_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache"));
    cache.join("kruntimes").join("controlplane")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Where the binaries of this version live once built.
pub fn bin_dir() -> PathBuf {
    cache_root().join(format!("k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}"))
}

/// Whether kube-apiserver, etcd and kubectl are all in [`bin_dir`].
pub fn is_built() -> bool {
    let dir = bin_dir();
    ["kube-apiserver", "etcd", "kubectl"]
        .iter()
        .all(|b| is_executable(&dir.join(b)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Returns the directory holding kube-apiserver, etcd and kubectl, building them with Go
/// through the embedded recipe when they are missing. `progress` receives every line the
/// build prints. Only one process builds at a time (a lock file in the cache root); the
/// others wait for it and then reuse its binaries.
pub fn build(progress: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    if is_built() {
        return Ok(bin_dir());
    }
    let root = cache_root();
    std::fs::create_dir_all(&root).map_err(io(format!("cannot create {}", root.display())))?;
    let lock_path = root.join(".build.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("cannot open {}", lock_path.display())))?;
    if !try_flock(&lock).map_err(io(format!("cannot lock {}", lock_path.display())))? {
        progress("waiting for another process that is building the control plane");
        flock(&lock).map_err(io(format!("cannot lock {}", lock_path.display())))?;
    }
    if is_built() {
        return Ok(bin_dir());
    }
    match Command::new("go").arg("version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::GoMissing),
        Err(e) => return Err(io("cannot run `go version`")(e)),
        Ok(_) => {}
    }

    let recipe = root.join(format!("recipe-k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}"));
    for (rel, body) in RECIPE {
        let path = recipe.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(*body) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        std::fs::write(&path, body).map_err(io(format!("cannot write {}", path.display())))?;
    }

    let log_path = root.join("build.log");
    let mut log = std::fs::File::create(&log_path)
        .map_err(io(format!("cannot create {}", log_path.display())))?;
    let mut child = Command::new("bash")
        .arg(recipe.join("build.sh"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("cannot run bash for the control-plane build"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let mut last = String::new();
    for line in BufReader::new(child.stderr.take().expect("piped stderr"))
        .lines()
        .map_while(|l| l.ok())
    {
        let _ = writeln!(log, "{line}");
        if !line.trim().is_empty() {
            last = line.trim().to_string();
            progress(&last);
        }
    }
    let status = child
        .wait()
        .map_err(io("cannot wait for the control-plane build"))?;
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(Error::Build {
            status,
            last,
            log: log_path,
        });
    }
    Ok(PathBuf::from(out.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn embedded_recipe_is_the_checked_in_one() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane");
        for (rel, body) in RECIPE {
            let on_disk = std::fs::read_to_string(root.join(rel)).unwrap();
            assert_eq!(&on_disk, body, "{rel}");
        }
        let script = RECIPE[0].1;
        assert!(script.contains(&format!("K8S_VERSION={K8S_VERSION}")));
        assert!(script.contains(&format!("ETCD_VERSION={ETCD_VERSION}")));
    }
}
