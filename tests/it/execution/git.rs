//! A Git source, on runtimed's own processes and on the Go project's Bash runtime server:
//! checked out at its commit from the tests' Git server, within runtimed's bounds of size,
//! trust and time.

use super::support::git::GitServer;
use super::*;

/// A Git source on `backend`: the commit (full or abbreviated ID, or the default branch) is
/// checked out into `<run dir>/repo`, the working directory of its entrypoint, fetched over
/// https from the tests' Git server (Git's own `http-backend`) with runtimed trusting its CA;
/// a commit or repository that is not there, or a URL runtimed does not fetch, ends the Run
/// `StartFailed` with the field's name.
async fn a_git_source_is_checked_out_at_its_commit(prefix: &str, backend: Backend) {
    let git = GitServer::start();
    let script = |version: &str| {
        format!(
            "#!/bin/sh\necho \"version={version}\" >> \"$KRUNTIME_OUTPUTS\"\necho \"dir=$(pwd)\" >> \"$KRUNTIME_OUTPUTS\"\necho \"data=$(cat data/file)\" >> \"$KRUNTIME_OUTPUTS\"\n"
        )
    };
    let (v1, v2) = (script("1"), script("2"));
    let ids = git.repository(
        "jobs",
        &[
            &[("run.sh", &v1, true), ("data/file", "one", false)],
            &[("run.sh", &v2, true), ("data/file", "two", false)],
        ],
    );
    let ca = git.ca_file().display().to_string();
    let scenario =
        Scenario::start_with(prefix, backend, "pool", &["--git-ca-file", ca.as_str()]).await;
    let ns = scenario.ns();
    let url = git.url("jobs");
    let pinned = ids[0].as_str();
    for (name, url, commit) in [
        ("pinned", url.as_str(), Some(pinned)),
        ("short", url.as_str(), Some(&pinned[..10])),
        ("head", url.as_str(), None),
        (
            "no-commit",
            url.as_str(),
            Some("0123456789abcdef0123456789abcdef01234567"),
        ),
        ("no-repo", &git.url("missing"), None),
        ("plain-http", "http://127.0.0.1:1/jobs.git", None),
    ] {
        run(name)
            .runtime("pool")
            .git(url, commit, "run.sh")
            .create(ns)
            .await;
    }
    let names = [
        "pinned",
        "short",
        "head",
        "no-commit",
        "no-repo",
        "plain-http",
    ];
    let ended = scenario.terminal(&names).await;
    for (name, version, data) in [
        ("pinned", "1", "one"),
        ("short", "1", "one"),
        ("head", "2", "two"),
    ] {
        let r = &ended[name];
        let s = status_of(r);
        assert_eq!(r.phase(), RunPhase::Succeeded, "{name}: {s:?}");
        let dir = scenario.workspace().join(r.uid().unwrap()).join("repo");
        assert_eq!(
            s.outputs,
            outputs(&[
                ("version", version),
                ("dir", &dir.display().to_string()),
                ("data", data)
            ]),
            "{name}: its commit's files, run in <run dir>/repo"
        );
    }
    for (name, says) in [
        ("no-commit", "spec.source.commitSHA \"0123456789abcdef"),
        ("no-repo", "spec.source.repoURL"),
        ("plain-http", "must be an https:// or ssh:// URL"),
    ] {
        let r = &ended[name];
        let s = status_of(r);
        assert_eq!(
            (r.phase(), s.reason.as_deref()),
            (RunPhase::Failed, Some(reasons::START_FAILED)),
            "{name}: {s:?}"
        );
        let message = s.message.as_deref().unwrap_or_default();
        assert!(message.contains(says), "{name}: {message}");
    }
    scenario.directories_removed(ended.values()).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_source_is_checked_out_at_its_commit_as_runtimeds_own_process() {
    a_git_source_is_checked_out_at_its_commit("git-child", Backend::Child).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_source_is_checked_out_at_its_commit_on_the_go_projects_bash_runtime_server() {
    a_git_source_is_checked_out_at_its_commit("git-bash", Backend::Bash).await;
}

/// The bounds of a checkout, without a control plane: a checkout larger than `--git-max-bytes`
/// is refused, a server whose CA runtimed does not trust is not fetched from, and a server
/// that never answers ends the fetch at `--git-timeout`.
#[testkit::test]
fn a_checkout_is_bounded_in_size_trust_and_time() {
    use kruntimes::runtimed::git::{FetchOptions, GitError, GitSource, checkout};
    use std::sync::{Arc, atomic::AtomicBool};
    let git = GitServer::start();
    git.repository("big", &[&[("blob", &"x".repeat(64 * 1024), false)]]);
    let dest = tempfile::tempdir().unwrap();
    let source = GitSource {
        url: git.url("big"),
        commit: None,
    };
    let trusted = FetchOptions {
        ca_file: Some(git.ca_file()),
        ..Default::default()
    };
    let go = Arc::new(AtomicBool::new(false));
    let repo = dest.path().join("repo");
    checkout(&source, &repo, &trusted, &go).expect("within the default bounds");
    assert!(repo.join("blob").is_file());
    let small = FetchOptions {
        max_bytes: 16 * 1024,
        ..trusted.clone()
    };
    let err = checkout(&source, &repo, &small, &go).unwrap_err();
    assert_eq!(
        err,
        GitError::TooLarge {
            url: source.url.clone(),
            limit: 16 * 1024
        }
    );
    let err = checkout(&source, &repo, &FetchOptions::default(), &go).unwrap_err();
    assert!(
        matches!(&err, GitError::Fetch { error, .. } if error.contains("certificate")),
        "{err}"
    );
    // Accepts connections (the kernel's backlog) and never answers.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = GitSource {
        url: format!("https://{}/r.git", stalled.local_addr().unwrap()),
        commit: None,
    };
    let quick = FetchOptions {
        timeout: Duration::from_secs(1),
        ..trusted
    };
    let err = checkout(&silent, &repo, &quick, &go).unwrap_err();
    assert_eq!(
        err,
        GitError::TimedOut {
            url: silent.url.clone(),
            timeout: Duration::from_secs(1)
        }
    );
    // A redirect to plain HTTP is not followed: the fetch fails and nothing connects to the
    // plain-HTTP listener it names.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    plain.set_nonblocking(true).unwrap();
    let redirected = GitSource {
        url: git.redirect_to_http_url(plain.local_addr().unwrap().port(), "big"),
        commit: None,
    };
    let err = checkout(&redirected, &repo, &quick, &go).unwrap_err();
    assert!(matches!(&err, GitError::Fetch { .. }), "{err}");
    assert!(
        plain.accept().is_err(),
        "the fetch followed a redirect to plain HTTP"
    );
}

/// `--git-max-bytes` stops a fetch while it downloads, not after: a repository of about
/// 6 MiB of pack served slowly is fetched whole with the default bound (the baseline, timed),
/// and with a bound of 512 KiB it ends `TooLarge` in a fraction of that time, measured in the
/// same run.
#[testkit::test]
fn a_fetch_is_stopped_at_its_byte_bound_while_it_downloads() {
    use kruntimes::runtimed::git::{FetchOptions, GitError, GitSource, checkout};
    use std::sync::{Arc, atomic::AtomicBool};
    let git = GitServer::start();
    // Printable noise that zlib cannot shrink much: the pack stays about this large.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: String = (0..8 << 20)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'!' + ((seed >> 33) % 94) as u8)
        })
        .collect();
    git.repository("noise", &[&[("noise.txt", &noise, false)]]);
    let source = GitSource {
        url: git.slow_url("noise"),
        commit: None,
    };
    let trusted = FetchOptions {
        ca_file: Some(git.ca_file()),
        max_bytes: 64 << 20,
        timeout: Duration::from_secs(120),
    };
    let go = Arc::new(AtomicBool::new(false));
    let dest = tempfile::tempdir().unwrap();
    let repo = dest.path().join("repo");
    let started = std::time::Instant::now();
    checkout(&source, &repo, &trusted, &go).expect("within a bound of 64 MiB");
    let whole = started.elapsed();
    let bounded = FetchOptions {
        max_bytes: 512 << 10,
        ..trusted
    };
    let started = std::time::Instant::now();
    let err = checkout(&source, &repo, &bounded, &go).unwrap_err();
    let stopped = started.elapsed();
    assert_eq!(
        err,
        GitError::TooLarge {
            url: source.url.clone(),
            limit: 512 << 10
        }
    );
    eprintln!("the whole fetch took {whole:?}; bounded at 512 KiB it stopped after {stopped:?}");
    assert!(
        stopped < whole / 2,
        "stopped after {stopped:?}, the whole fetch took {whole:?}: the bound was applied after the download"
    );
}
