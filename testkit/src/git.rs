//! The tests' Git server (`git/server.py`: Git's own `git http-backend` over HTTPS on the
//! loopback, with a CA of the test's own) and the bare repositories it serves, made with the
//! `git` command. Killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running Git server; its repositories live in a temporary directory.
pub struct GitServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// A file of a commit: path, contents, executable.
pub type File<'a> = (&'a str, &'a str, bool);

impl GitServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("a directory for the Git server");
        let pki = kruntimes::cmd::dev::controlplane::Layout::new(dir.path().join("tls"));
        kruntimes::cmd::dev::controlplane::ensure_pki(&pki).expect("a CA and serving certificate");
        std::fs::create_dir_all(dir.path().join("repos")).unwrap();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/git/server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(dir.path().join("repos"))
            .arg(pki.pki().join("serving.crt"))
            .arg(pki.pki().join("serving.key"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the tests' Git server (testkit/src/git/server.py)");
        let mut line = String::new();
        use std::io::BufRead as _;
        std::io::BufReader::new(child.stdout.take().expect("a piped stdout"))
            .read_line(&mut line)
            .expect("the Git server's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the Git server printed {line:?}, not its port"));
        GitServer { child, port, dir }
    }

    /// The CA runtimed must trust (`--git-ca-file`).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("tls/pki/ca.crt")
    }

    /// The https URL of the repository `name`.
    pub fn url(&self, name: &str) -> String {
        format!("https://127.0.0.1:{}/{name}.git", self.port)
    }

    /// `name` served in small pieces, slowly (`/slow/`).
    pub fn slow_url(&self, name: &str) -> String {
        format!("https://127.0.0.1:{}/slow/{name}.git", self.port)
    }

    /// A URL that redirects to `name` at `http://127.0.0.1:<port>` (`/redirect-http/`).
    pub fn redirect_to_http_url(&self, port: u16, name: &str) -> String {
        format!(
            "https://127.0.0.1:{}/redirect-http/{port}/{name}.git",
            self.port
        )
    }

    /// Creates the bare repository `name` with one commit per entry of `commits` (each adds or
    /// replaces its files) on its default branch `main`; returns the commit IDs, oldest first.
    pub fn repository(&self, name: &str, commits: &[&[File<'_>]]) -> Vec<String> {
        let work = self.dir.path().join("work").join(name);
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        let mut ids = Vec::new();
        for (i, files) in commits.iter().enumerate() {
            for (path, text, executable) in *files {
                let file = work.join(path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, text).unwrap();
                use std::os::unix::fs::PermissionsExt as _;
                let mode = if *executable { 0o755 } else { 0o644 };
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            git(&work, &["add", "-A"]);
            git(&work, &["commit", "-q", "-m", &format!("commit {i}")]);
            ids.push(git(&work, &["rev-parse", "HEAD"]));
        }
        let bare = self.dir.path().join("repos").join(format!("{name}.git"));
        git(
            self.dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        ids
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `git args` in `dir` (a fixed identity, no user or system configuration); its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=kruntimes tests",
            "-c",
            "user.email=tests@kruntimes.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("the git command (the tests make their repositories with it)");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
