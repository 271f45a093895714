//! `kubectl kruntimes run [NAME] --runtime R [-f FILE | --inline SCRIPT | -- CMD…]`: creates a
//! Run (the Go project's `krt run` flags where they apply) and, with `--wait`, streams its log
//! and exits with its task's exit code, as `kubectl run --attach` ends with its container's.
//!
//! [`manifest`] builds the Run from the flags (pure: every bad flag is an error naming it);
//! [`exec`] is the I/O edge: create (or `--dry-run`), print, and follow the Run to its end
//! with [`wait::until_decided`]. It decides nothing about how a Run ends.

use std::io::Read as _;

use anyhow::{Context as _, anyhow, bail};
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use serde_json::{Map, Value, json};

use crate::api::wait::{For, Verdict};
use crate::api::{Run, RunPhase};
use crate::cmd::cli::{DryRun, GlobalArgs, RunArgs};
use crate::cmd::wait;
use crate::output::{Format, Printed};

/// `run --wait` of a Run that did not succeed: the process exits with `code`, after saying
/// `said` on stderr.
#[derive(Debug, thiserror::Error)]
#[error("{said}")]
pub struct ExitWith {
    pub code: u8,
    pub said: String,
}

/// The Run the flags describe (in `namespace`), or the flag that is wrong and why. `script`
/// is what `-f` read, when given.
pub fn manifest(args: &RunArgs, namespace: &str, script: Option<String>) -> Result<Run, String> {
    let mut metadata = Map::new();
    match &args.name {
        Some(name) => metadata.insert("name".into(), json!(name)),
        None => metadata.insert("generateName".into(), json!("run-")),
    };
    metadata.insert("namespace".into(), json!(namespace));
    if args.runtime.is_empty() {
        return Err("--runtime: give the Runtime that runs it".into());
    }
    let mut spec = Map::new();
    spec.insert("runtime".into(), json!(args.runtime));
    let inline = script.or_else(|| args.inline.clone());
    let mut source = Map::new();
    if let Some(inline) = &inline {
        source.insert("inline".into(), json!(inline));
    }
    if let Some(url) = &args.repo_url {
        source.insert("repoURL".into(), json!(url));
        if let Some(sha) = &args.commit_sha {
            source.insert("commitSHA".into(), json!(sha));
        }
    }
    if !source.is_empty() {
        spec.insert("source".into(), Value::Object(source));
    }
    let mode = match &args.handler {
        Some(handler) => {
            if !args.command.is_empty() {
                return Err(format!(
                    "--handler {handler}: a function takes no command after --; drop one of them"
                ));
            }
            json!({"function": {"handler": handler}})
        }
        None => {
            if inline.is_none() && args.repo_url.is_none() && args.command.is_empty() {
                return Err(
                    "nothing to run: give a command after --, a script with -f FILE or --inline, or --repo-url"
                        .into(),
                );
            }
            let mut task = Map::new();
            if let Some(entrypoint) = &args.entrypoint {
                task.insert("entrypoint".into(), json!(entrypoint));
            }
            if !args.command.is_empty() {
                task.insert("args".into(), json!(args.command));
            }
            json!({ "task": task })
        }
    };
    spec.insert("mode".into(), mode);
    let env = args
        .env
        .iter()
        .map(|e| match e.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok(json!({"name": name, "value": value})),
            _ => Err(format!("--env {e:?}: give KEY=VALUE")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !env.is_empty() {
        spec.insert("env".into(), json!(env));
    }
    let mut requests = Map::new();
    for r in &args.requests {
        match r.split_once('=') {
            Some((name, quantity)) if !name.is_empty() && !quantity.is_empty() => {
                requests.insert(name.to_string(), json!(quantity));
            }
            _ => return Err(format!("--request {r:?}: give NAME=QUANTITY, e.g. runs=1")),
        }
    }
    if !requests.is_empty() {
        spec.insert("resources".into(), json!({ "requests": requests }));
    }
    if let Some(timeout) = &args.timeout {
        crate::util::duration::parse_duration(timeout).map_err(|e| format!("--timeout: {e}"))?;
        spec.insert("timeout".into(), json!(timeout));
    }
    if let Some(attempts) = args.retry_attempts {
        if attempts < 1 {
            return Err(format!(
                "--retry-attempts {attempts}: give the attempts in all, 1 or more"
            ));
        }
        let backoff = args.retry_backoff.clone().unwrap_or_else(|| "1s".into());
        crate::util::duration::parse_duration(&backoff)
            .map_err(|e| format!("--retry-backoff: {e}"))?;
        spec.insert(
            "retryPolicy".into(),
            json!({"maxAttempts": attempts, "backoff": backoff}),
        );
    }
    if let Some(class) = &args.priority_class {
        spec.insert("priorityClassName".into(), json!(class));
    }
    let run = json!({
        "apiVersion": "kruntimes.io/v1alpha1",
        "kind": "Run",
        "metadata": metadata,
        "spec": spec,
    });
    serde_json::from_value(run).map_err(|e| format!("the Run the flags describe: {e}"))
}

/// Runs the command.
pub async fn exec(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<()> {
    let script = match &args.file {
        None => None,
        Some(path) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("-f -: reading the script from stdin")?;
            Some(text)
        }
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("-f {}: reading the script", path.display()))?,
        ),
    };
    let namespace = global.namespace.clone().unwrap_or_default();
    if args.dry_run == DryRun::Client {
        let mut run = manifest(args, &namespace, script).map_err(|e| anyhow!(e))?;
        if namespace.is_empty() {
            // Without a connection the context's namespace is unknown: say none.
            run.metadata.namespace = None;
        }
        return print(&run, args.output.as_ref(), "created (dry run)");
    }
    let target = crate::kubeclient::connect(global).await?;
    let run = manifest(args, &target.namespace, script).map_err(|e| anyhow!(e))?;
    let runs: Api<Run> = Api::namespaced(target.client.clone(), &target.namespace);
    let params = PostParams {
        dry_run: args.dry_run == DryRun::Server,
        field_manager: Some(crate::api::FIELD_MANAGER.to_string()),
    };
    let created = runs.create(&params, &run).await.map_err(|e| {
        target.explain_error(e, &format!("creating a Run on runtime/{}", args.runtime))
    })?;
    let said = match args.dry_run {
        DryRun::Server => "created (server dry run)",
        _ => "created",
    };
    print(&created, args.output.as_ref(), said)?;
    if !args.wait || args.dry_run == DryRun::Server {
        return Ok(());
    }
    follow(&target, &runs, &created.name_any(), args).await
}

/// Prints the Run as `-o` asks.
fn print(run: &Run, format: Option<&Format>, said: &str) -> anyhow::Result<()> {
    let name = run
        .metadata
        .name
        .clone()
        .or_else(|| {
            run.metadata
                .generate_name
                .as_ref()
                .map(|g| format!("{g}<generated>"))
        })
        .unwrap_or_default();
    let printed = Printed {
        value: run,
        names: vec![format!("run.kruntimes.io/{name}")],
        rows: "",
    };
    let text = match format
        .map(|f| crate::output::render(f, &printed))
        .transpose()?
    {
        Some(Some(text)) => text,
        // `-o` of `run` takes no table (clap's parser refuses one).
        None | Some(None) => format!("run.kruntimes.io/{name} {said}\n"),
    };
    crate::output::write_stdout(&text).context("writing to stdout")
}

/// `--wait`: streams the log once the Run runs (a log that cannot be read is said on stderr,
/// and the end is still awaited), then ends as the Run did.
async fn follow(
    target: &crate::kubeclient::Target,
    runs: &Api<Run>,
    name: &str,
    args: &RunArgs,
) -> anyhow::Result<()> {
    let started = For::Condition {
        type_: crate::api::status::CONDITION_ADMITTED.into(),
        status: "True".into(),
    };
    let (_, run) = wait::until_decided(runs, name, &started, args.wait_timeout).await?;
    // Started (or ended before it could be seen running): its log is on its Pod.
    if run
        .as_ref()
        .is_some_and(|r| crate::cmd::logs::pod_of(r, name).is_ok())
        && let Err(e) = crate::cmd::logs::stream(target, name, true, -1).await
    {
        eprintln!("warning: cannot stream the log of run/{name} ({e:#}); waiting for its end");
    }
    let (verdict, run) = wait::until_decided(
        runs,
        name,
        &For::Phase(RunPhase::Succeeded),
        args.wait_timeout,
    )
    .await?;
    match (verdict, run) {
        (Verdict::Met, _) => Ok(()),
        (Verdict::Never(why), run) => {
            let code = run
                .as_ref()
                .and_then(|r| r.status.as_ref()?.exit_code)
                .filter(|c| (1..=255).contains(c))
                .map_or(1, |c| c as u8);
            Err(ExitWith {
                code,
                said: format!("error: run/{name}: {why}"),
            }
            .into())
        }
        (Verdict::Waiting, _) => bail!("run/{name}: still waiting, which cannot be"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cmd::cli::{Cli, Command};

    fn args(line: &[&str]) -> RunArgs {
        let mut argv = vec!["kubectl-kruntimes", "run"];
        argv.extend(line);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(args) => *args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_command_after_the_dashes_is_the_tasks_args_and_the_name_is_generated() {
        let a = args(&["--runtime", "bash", "-e", "A=1", "--", "echo", "hi"]);
        let run = manifest(&a, "ns", None).unwrap();
        assert_eq!(run.metadata.generate_name.as_deref(), Some("run-"));
        assert_eq!(run.spec.runtime, "bash");
        let task = run.spec.mode.task.as_ref().unwrap();
        assert_eq!(task.args, ["echo", "hi"]);
        assert_eq!(run.spec.env[0].name, "A");
        assert_eq!(run.spec.env[0].value.as_deref(), Some("1"));
    }

    #[test]
    fn a_script_retries_requests_and_a_timeout_are_the_runs() {
        let a = args(&[
            "train",
            "-r",
            "python",
            "--request",
            "example.com/gpu=1",
            "--timeout",
            "10m",
            "--retry-attempts",
            "3",
        ]);
        let run = manifest(&a, "ns", Some("print(1)".into())).unwrap();
        assert_eq!(run.metadata.name.as_deref(), Some("train"));
        let source = run.spec.source.as_ref().unwrap();
        assert_eq!(source.inline.as_deref(), Some("print(1)"));
        assert_eq!(run.spec.timeout.as_deref(), Some("10m"));
        let retry = run.spec.retry_policy.as_ref().unwrap();
        assert_eq!(
            (retry.max_attempts, retry.backoff.as_deref()),
            (Some(3), Some("1s"))
        );
        assert!(run.request().unwrap().get("example.com/gpu") == 1);
    }

    #[test]
    fn bad_flags_name_the_flag_and_what_to_give() {
        let nothing = manifest(&args(&["-r", "bash"]), "ns", None).unwrap_err();
        assert!(nothing.starts_with("nothing to run"), "{nothing}");
        let env = manifest(
            &args(&["-r", "bash", "-e", "NOPE", "--", "true"]),
            "ns",
            None,
        );
        assert_eq!(env.unwrap_err(), "--env \"NOPE\": give KEY=VALUE");
        let timeout = manifest(
            &args(&["-r", "b", "--timeout", "soon", "--", "x"]),
            "ns",
            None,
        );
        assert!(
            timeout
                .unwrap_err()
                .starts_with("--timeout: \"soon\" is not a duration")
        );
        let handler = manifest(
            &args(&["-r", "py", "--handler", "m.f", "--", "x"]),
            "ns",
            None,
        );
        assert!(handler.unwrap_err().contains("a function takes no command"));
        assert!(Cli::try_parse_from(["k", "run", "-r", "b", "-f", "x", "--inline", "y"]).is_err());
    }
}
