use super::*;
use crate::api::{CodeSource, TaskMode};
use crate::runtimed::git::GitSource;
use crate::testing::{env_var, task_mode as task};
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::api::core::v1::{EnvVarSource, ObjectFieldSelector};

#[test]
fn prepare_splits_program_and_args_and_keeps_plain_env() {
    let mut t = task(&["sh", "-c", "exit 3"]);
    let env = vec![env_var("A", Some("1")), env_var("EMPTY", None)];
    t.working_dir = Some("/tmp".into());
    let p = prepare(Some(&t), &env, None).unwrap();
    assert_eq!(p.program, "sh");
    assert_eq!(p.args, ["-c", "exit 3"]);
    assert_eq!(
        p.env,
        [
            ("A".to_string(), "1".to_string()),
            ("EMPTY".to_string(), String::new())
        ]
    );
    assert_eq!(p.working_dir.as_deref(), Some("/tmp"));
}

#[test]
fn prepare_runs_the_entrypoint_with_every_arg() {
    let mut t = task(&["--epochs", "3"]);
    t.entrypoint = Some("train.sh".into());
    let p = prepare(Some(&t), &[], None).unwrap();
    assert_eq!(
        (p.program.as_str(), p.args),
        ("./train.sh", vec!["--epochs".to_string(), "3".to_string()])
    );
}

#[test]
fn a_git_source_is_fetched_only_over_https_or_ssh_and_named_when_refused() {
    let t = task(&["x"]);
    let git = |url: &str| CodeSource {
        repo_url: Some(url.into()),
        commit_sha: Some("abc123".into()),
        ..Default::default()
    };
    let p = prepare(Some(&t), &[], Some(&git("https://example.com/repo.git"))).unwrap();
    assert_eq!(
        p.git,
        Some(GitSource {
            url: "https://example.com/repo.git".into(),
            commit: Some("abc123".into())
        })
    );
    let function = crate::api::FunctionMode {
        handler: Some("h.f".into()),
        idle_timeout_seconds: None,
    };
    let f = prepare_function(&function, &[], Some(&git("git@host:o/r.git"))).unwrap();
    assert_eq!(f.git.map(|g| g.url), Some("git@host:o/r.git".into()));
    let err = prepare(Some(&t), &[], Some(&git("http://example.com/repo.git"))).unwrap_err();
    assert_eq!(
        err,
        TaskError::RepoUrl("http://example.com/repo.git".into())
    );
    assert!(
        err.to_string().starts_with("spec.source.repoURL \"http://"),
        "{err}"
    );
}

/// A child that never finishes fetching: stopping it ends it as SIGTERM ends a process,
/// killing it as SIGKILL does; a failed fetch ends it `StartFailed`; and nothing is started.
#[tokio::test]
async fn a_staged_child_stops_while_it_fetches_and_fails_to_start_when_the_fetch_fails() {
    let (exits, mut ended) = mpsc::unbounded_channel();
    let never_started = || -> Result<ChildHandle, SpawnError> { panic!("started") };
    let pending = std::future::pending::<Result<(), String>>();
    let handle = staged("a", pending, never_started, exits.clone());
    handle.terminate();
    let exit = ended.recv().await.unwrap();
    assert_eq!(
        (exit.uid.as_str(), exit.status, exit.killed),
        (
            "a",
            Ok(Exit::Process(ExitStatus::Signal(libc::SIGTERM))),
            false
        )
    );
    let pending = std::future::pending::<Result<(), String>>();
    let mut handle = staged("b", pending, never_started, exits.clone());
    handle.kill();
    let exit = ended.recv().await.unwrap();
    assert_eq!(
        (exit.status, exit.killed),
        (Ok(Exit::Process(ExitStatus::Signal(libc::SIGKILL))), true)
    );
    let failed = async { Err::<(), _>("spec.source.repoURL: gone".to_string()) };
    let _handle = staged("c", failed, never_started, exits);
    let exit = ended.recv().await.unwrap();
    let Ok(Exit::Server(terminal)) = exit.status else {
        panic!("{:?}", exit.status)
    };
    assert_eq!(
        (terminal.reason, terminal.message.as_str()),
        (reasons::START_FAILED, "spec.source.repoURL: gone")
    );
}

#[test]
fn an_inline_script_is_the_task_in_the_file_script() {
    let mut t = task(&["--ignored"]);
    t.entrypoint = Some("ignored.sh".into());
    let inline = |text: &str| CodeSource {
        inline: Some(text.into()),
        ..Default::default()
    };
    // Without a #! line the shell reads it; with one it is the program.
    let p = prepare(Some(&t), &[], Some(&inline("echo hi"))).unwrap();
    assert_eq!(
        (p.program.as_str(), p.args.as_slice()),
        ("sh", &["script".to_string()][..])
    );
    assert_eq!(p.entrypoint.as_deref(), Some("script"));
    assert_eq!(
        p.source,
        Some(SourceFile {
            path: "script".into(),
            text: "echo hi".into(),
            executable: false
        })
    );
    let p = prepare(Some(&t), &[], Some(&inline("#!/bin/sh\necho hi"))).unwrap();
    assert_eq!((p.program.as_str(), p.args.len()), ("./script", 0));
    assert!(p.source.unwrap().executable);
    // The Go project's style: an empty task with an inline source.
    let p = prepare(Some(&TaskMode::default()), &[], Some(&inline("true"))).unwrap();
    assert_eq!(p.entrypoint.as_deref(), Some("script"));
}

#[test]
fn an_entrypoint_outside_the_runs_directory_is_refused_naming_the_field() {
    for bad in ["/bin/sh", "../up.sh", "a/../../b.sh", ".", "./"] {
        let mut t = task(&[]);
        t.entrypoint = Some(bad.into());
        let err = prepare(Some(&t), &[], None).unwrap_err();
        assert_eq!(err, TaskError::Entrypoint(bad.into()));
        assert!(
            err.to_string().starts_with("spec.mode.task.entrypoint "),
            "{err}"
        );
    }
    for good in ["main.sh", "./main.sh", "bin/run"] {
        let mut t = task(&[]);
        t.entrypoint = Some(good.into());
        assert!(prepare(Some(&t), &[], None).is_ok(), "{good}");
    }
}

#[test]
fn a_registration_digest_is_stable_and_changes_with_what_defines_it() {
    let function = crate::api::FunctionMode {
        handler: Some("hello.greet".into()),
        idle_timeout_seconds: Some(60),
    };
    let source = CodeSource {
        inline: Some("greet() { echo hi; }".into()),
        inline_path: Some("hello.sh".into()),
        ..Default::default()
    };
    let env = |v: &str| vec![env_var("A", Some(v))];
    let digest = |function: &crate::api::FunctionMode, env: &[EnvVar], source: &CodeSource| {
        let p = prepare_function(function, env, Some(source)).unwrap();
        p.function.unwrap().digest
    };
    let first = digest(&function, &env("1"), &source);
    assert!(first.starts_with("sha256:") && first.len() == 71, "{first}");
    assert!(first.len() <= 128, "the Bash runtime server's bound");
    assert_eq!(first, digest(&function, &env("1"), &source), "stable");
    assert_ne!(first, digest(&function, &env("2"), &source));
    let other_source = CodeSource {
        inline: Some("greet() { echo bye; }".into()),
        ..source.clone()
    };
    assert_ne!(first, digest(&function, &env("1"), &other_source));
    let other_idle = crate::api::FunctionMode {
        idle_timeout_seconds: Some(61),
        ..function.clone()
    };
    assert_ne!(first, digest(&other_idle, &env("1"), &source));
    let p = prepare_function(&function, &env("1"), Some(&source)).unwrap();
    assert_eq!(
        p.source.map(|s| (s.path, s.executable)),
        Some(("hello.sh".to_string(), false))
    );
}

#[test]
fn prepare_refuses_missing_tasks_empty_args_and_value_from() {
    assert_eq!(prepare(None, &[], None), Err(TaskError::NoTask));
    assert_eq!(
        prepare(Some(&task(&[])), &[], None),
        Err(TaskError::EmptyArgs)
    );
    let t = task(&["true"]);
    let env = vec![EnvVar {
        name: "NODE".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "spec.nodeName".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }];
    let err = prepare(Some(&t), &env, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.env[\"NODE\"] uses valueFrom, which runtimed does not support; set a plain value instead"
    );
}

#[test]
fn exits_map_to_terminal_statuses() {
    let ok = ExitStatus::Code(0).terminal();
    assert_eq!(
        (ok.outcome, ok.reason, ok.exit_code),
        (Outcome::Succeeded, reasons::SUCCEEDED, Some(0))
    );
    let three = ExitStatus::Code(3).terminal();
    assert_eq!(
        (three.outcome, three.reason, three.exit_code),
        (Outcome::Failed, reasons::EXIT_CODE, Some(3))
    );
    assert_eq!(three.message, "the process exited with code 3");
    let killed = ExitStatus::Signal(9).terminal();
    assert_eq!(
        (killed.outcome, killed.exit_code),
        (Outcome::Failed, Some(137))
    );
    assert_eq!(killed.message, "the process was terminated by signal 9");
}

async fn run_to_exit(t: &TaskMode, env: &[EnvVar]) -> ChildExit {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _handle = spawn(
        &prepare(Some(t), env, None).unwrap(),
        "r",
        "uid-1",
        None,
        tx,
    )
    .unwrap();
    rx.recv().await.unwrap()
}

#[tokio::test]
async fn spawn_reports_the_exit_code_with_env_and_working_dir_applied() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = task(&[
        "sh",
        "-c",
        "test \"$KR_X\" = hello && test \"$(pwd -P)\" = \"$KR_DIR\" && exit 3",
    ]);
    let real = dir.path().canonicalize().unwrap().display().to_string();
    let env = vec![
        env_var("KR_X", Some("hello")),
        env_var("KR_DIR", Some(&real)),
    ];
    t.working_dir = Some(real);
    let exit = run_to_exit(&t, &env).await;
    assert_eq!(exit.uid, "uid-1");
    assert_eq!(
        exit.status,
        Ok(Exit::Process(ExitStatus::Code(3))),
        "env or workingDir were not applied"
    );
    assert!(!exit.killed);
}

#[tokio::test]
async fn an_entrypoint_is_the_script_in_the_working_directory_not_a_program_on_path() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("step.sh");
    std::fs::write(&script, "#!/bin/sh\nexit $1\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut t = task(&["5"]);
    t.entrypoint = Some("step.sh".into());
    t.working_dir = Some(dir.path().display().to_string());
    let exit = run_to_exit(&t, &[]).await;
    assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(5))));
}

#[tokio::test]
async fn a_missing_executable_is_a_start_error_naming_it() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let t = prepare(
        Some(&task(&["/nonexistent/kruntimes-no-such-program"])),
        &[],
        None,
    )
    .unwrap();
    let err = spawn(&t, "r", "u", None, tx).unwrap_err().to_string();
    assert!(
        err.starts_with("cannot start \"/nonexistent/kruntimes-no-such-program\": No such file"),
        "{err}"
    );
}

#[tokio::test]
async fn kill_ends_the_child_and_says_so() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut handle = spawn(
        &prepare(Some(&task(&["sleep", "30"])), &[], None).unwrap(),
        "r",
        "u",
        None,
        tx,
    )
    .unwrap();
    assert!(!handle.kill_requested());
    handle.kill();
    handle.kill();
    let exit = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.killed);
    assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Signal(9))));
}

#[tokio::test]
async fn dropping_the_handle_does_not_kill_the_child() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = spawn(
        &prepare(Some(&task(&["sh", "-c", "sleep 0.2; exit 4"])), &[], None).unwrap(),
        "r",
        "u",
        None,
        tx,
    )
    .unwrap();
    drop(handle);
    let exit = rx.recv().await.unwrap();
    assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(4))));
    assert!(!exit.killed);
}

/// Spawns `sh -c script` with the Run's `env` as Run `r` (UID `u`) logging under `root`, and
/// waits for its exit; returns it and the path of its log.
async fn run_logged(
    root: &std::path::Path,
    script: &str,
    env: &[EnvVar],
) -> (ChildExit, std::path::PathBuf) {
    let logs = crate::runtimed::runlog::RunLogs::new(root);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _handle = spawn(
        &prepare(Some(&task(&["sh", "-c", script])), env, None).unwrap(),
        "r",
        "u",
        Some(logs.writer("r", "u")),
        tx,
    )
    .unwrap();
    let exit = rx.recv().await.unwrap();
    (exit, root.join("logs/r_u.log"))
}

#[tokio::test]
async fn a_childs_output_is_in_its_runs_log_before_its_exit_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let (exit, log) = run_logged(root.path(), "echo out; echo err >&2; exit 2", &[]).await;
    assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(2))));
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, ["err", "out"]);
    assert!(log.with_extension("done").exists());
}

#[test]
fn an_inline_function_path_outside_the_runs_directory_is_refused_naming_the_field() {
    let function = crate::api::FunctionMode {
        handler: Some("h.f".into()),
        idle_timeout_seconds: None,
    };
    for bad in ["/etc/h.sh", "../h.sh", "a/../../h.sh", "."] {
        let source = CodeSource {
            inline: Some("f() { :; }".into()),
            inline_path: Some(bad.into()),
            ..Default::default()
        };
        let err = prepare_function(&function, &[], Some(&source)).unwrap_err();
        assert_eq!(err, TaskError::InlinePath(bad.into()));
        assert!(
            err.to_string().starts_with("spec.source.inlinePath "),
            "{err}"
        );
    }
}

/// A task inherits the container's environment but runtimed's own variables (its settings
/// and credentials), and gets a PATH when the container has none.
#[test]
fn a_task_inherits_the_containers_environment_but_runtimeds_own() {
    let vars = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (std::ffi::OsString::from(k), std::ffi::OsString::from(v)))
            .collect::<Vec<_>>()
    };
    let container = vars(&[
        ("PATH", "/bin"),
        ("HOME", "/home/app"),
        ("POD_NAME", "gpu-7xk2p"),
        ("MODEL_DIR", "/models"),
        ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ("AWS_ACCESS_KEY_ID", "AKIA"),
        ("KRUNTIMES_ARTIFACT_S3_BUCKET", "b"),
        ("KUBECONFIG", "/etc/kubeconfig"),
    ]);
    assert_eq!(
        inherited(container.into_iter()),
        vars(&[
            ("PATH", "/bin"),
            ("HOME", "/home/app"),
            ("POD_NAME", "gpu-7xk2p"),
            ("MODEL_DIR", "/models"),
        ])
    );
    let without_path = inherited(vars(&[("HOME", "/")]).into_iter());
    assert_eq!(without_path[1].0, "PATH");
}

/// A spawned task sees the Run's variables over the container's: `CARGO_MANIFEST_DIR` (set by
/// cargo for this process) it keeps, as any variable of the container. (That runtimed's own
/// never reach it is `tests/it/hostile_tasks.rs`'s, with a canary in a real runtimed.)
#[tokio::test]
async fn a_spawned_task_gets_the_runs_variables_over_the_inherited_ones() {
    let root = tempfile::tempdir().unwrap();
    let env = vec![
        env_var("RUN_VAR", Some("mine")),
        env_var("HOME", Some("/run-home")),
    ];
    let (exit, log) = run_logged(root.path(), "env", &env).await;
    assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(0))));
    let log = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.contains(&"RUN_VAR=mine"), "{log}");
    assert!(
        lines.contains(&"HOME=/run-home"),
        "the Run's value wins: {log}"
    );
    assert!(lines.iter().any(|l| l.starts_with("PATH=")), "{log}");
    assert!(
        lines.iter().any(|l| l.starts_with("CARGO_MANIFEST_DIR=")),
        "{log}"
    );
}
