//! What a Run's task or function becomes before anything starts: the program, its arguments,
//! environment, working directory and source files ([`prepare`], [`prepare_function`]), or
//! why it cannot run as written ([`TaskError`]). Pure: it reads the Run and writes nothing;
//! [`super::staged`] and [`super::spawn`] carry a [`Prepared`] out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use thiserror::Error;

use super::super::git::{self, GitSource};
use crate::api::{CodeSource, TaskMode};

/// Why a Run's task cannot be executed as written. Permanent: the Run is failed with
/// [`crate::api::status::reasons::START_FAILED`] and this message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TaskError {
    #[error("spec.mode.task is not set; a Run needs a task (or a function on a runtime server)")]
    NoTask,
    #[error(
        "spec.mode.function: a function Run needs a Runtime whose Pods serve the runtime contract (a template whose first container is named runtime); this Pod's runtimed runs tasks as its own processes"
    )]
    FunctionWithoutServer,
    #[error("spec.mode.function.handler is not set; name the module.function to register")]
    NoHandler,
    #[error(
        "spec.mode.task has neither entrypoint nor args; one of them must name the program to run"
    )]
    EmptyArgs,
    #[error(
        "spec.source.repoURL {0:?} must be an https:// or ssh:// URL, or git@host:path; runtimed does not fetch over plain http, git:// or from a local path"
    )]
    RepoUrl(String),
    #[error(
        "spec.mode.task.entrypoint {0:?} must be a relative path inside the Run's directory, without '..'"
    )]
    Entrypoint(String),
    #[error(
        "spec.source.inlinePath {0:?} must be a relative file path inside the Run's directory, without '..'"
    )]
    InlinePath(String),
    #[error(
        "spec.env[{name:?}] uses valueFrom, which runtimed does not support; set a plain value instead"
    )]
    EnvValueFrom { name: String },
}

/// A validated task, ready to spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// The task's `entrypoint` as written (`program` is its path to execute): a runtime
    /// server gets the script's name, not a path.
    pub entrypoint: Option<String>,
    /// A function Run's handler (then `program` and `args` are empty): registered on the
    /// runtime server instead of executed.
    pub function: Option<Function>,
    /// `spec.source.inline`, written into the working directory before the execution.
    pub source: Option<SourceFile>,
    /// `spec.source.repoURL`: checked out (the working directory then) before the execution.
    pub git: Option<GitSource>,
}

/// A file of the Run's source, written into its working directory before it executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the working directory (`script` for a task, `spec.source.inlinePath` for a
    /// function).
    pub path: String,
    pub text: String,
    /// Mode 0755 instead of 0644: a task's script with a `#!` line, run as the program.
    pub executable: bool,
}

/// The file a task's `spec.source.inline` is written to, and the runtime server's entrypoint
/// then (the Go project's name for it).
pub const INLINE_SCRIPT: &str = "script";

/// What a function Run registers on the runtime server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// `module.function`.
    pub handler: String,
    /// `idleTimeoutSeconds`: released after this long without an invocation.
    pub idle_timeout: Option<std::time::Duration>,
    /// What defines the registration, hashed (`sha256:<hex>`): the runtime server refuses the
    /// same attempt with another digest, so it is the same across runtimed restarts.
    pub digest: String,
}

/// Validates `spec.mode.function`, `spec.source` and `spec.env` for a registration on the
/// runtime server; an inline source is written to `spec.source.inlinePath` (the API checks
/// that path).
pub fn prepare_function(
    function: &crate::api::FunctionMode,
    env: &[EnvVar],
    source: Option<&CodeSource>,
) -> Result<Prepared, TaskError> {
    let handler = function
        .handler
        .clone()
        .filter(|h| !h.trim().is_empty())
        .ok_or(TaskError::NoHandler)?;
    let git = git_source(source)?;
    let env = plain_env(env)?;
    let idle_timeout = function
        .idle_timeout_seconds
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s as u64));
    let file = source.and_then(|s| Some((s.inline.clone()?, s.inline_path.clone()?)));
    if let Some((_, path)) = file.as_ref().filter(|(_, p)| !is_inside(p)) {
        return Err(TaskError::InlinePath(path.clone()));
    }
    let digest = registration_digest(source, &handler, &env, idle_timeout);
    Ok(Prepared {
        program: String::new(),
        args: Vec::new(),
        env,
        working_dir: None,
        entrypoint: None,
        function: Some(Function {
            handler,
            idle_timeout,
            digest,
        }),
        source: file.map(|(text, path)| SourceFile {
            path,
            text,
            executable: false,
        }),
        git,
    })
}

/// `spec.source.repoURL` and `commitSHA`, when the URL is one runtimed fetches.
fn git_source(source: Option<&CodeSource>) -> Result<Option<GitSource>, TaskError> {
    let Some(source) = source else {
        return Ok(None);
    };
    let Some(url) = source.repo_url.clone().filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    if !git::check_url(&url) {
        return Err(TaskError::RepoUrl(url));
    }
    let commit = source.commit_sha.clone().filter(|c| !c.trim().is_empty());
    Ok(Some(GitSource { url, commit }))
}

/// `sha256:` and the hex SHA-256 of what defines a function registration: its source, handler,
/// environment and idle timeout, serialised canonically (the environment sorted by name, a
/// repeated name's last value kept, as the server's map keeps it). Not the working
/// directory: a registration is the same wherever its Run's directory is.
fn registration_digest(
    source: Option<&CodeSource>,
    handler: &str,
    env: &[(String, String)],
    idle_timeout: Option<std::time::Duration>,
) -> String {
    let env: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let defined = serde_json::json!({
        "source": source,
        "handler": handler,
        "env": env,
        "idleTimeoutSeconds": idle_timeout.map(|d| d.as_secs()),
    });
    crate::util::digest::sha256(defined.to_string().as_bytes())
}

/// Plain `name`/`value` environment variables (an absent value is the empty string).
fn plain_env(env: &[EnvVar]) -> Result<Vec<(String, String)>, TaskError> {
    env.iter()
        .map(
            |EnvVar {
                 name,
                 value,
                 value_from,
             }| match value_from {
                Some(_) => Err(TaskError::EnvValueFrom { name: name.clone() }),
                None => Ok((name.clone(), value.clone().unwrap_or_default())),
            },
        )
        .collect()
}

/// Validates `spec.mode.task` and `spec.env`: a program (the `entrypoint` with `args` as its
/// arguments, else the first of `args`), plain `name`/`value` environment variables (an
/// absent value is the empty string, as in a Pod) and an optional working directory.
pub fn prepare(
    task: Option<&TaskMode>,
    env: &[EnvVar],
    source: Option<&CodeSource>,
) -> Result<Prepared, TaskError> {
    let task = task.ok_or(TaskError::NoTask)?;
    let git = git_source(source)?;
    let env = plain_env(env)?;
    let working_dir = task.working_dir.clone().filter(|d| !d.is_empty());
    // An inline script is the task: written to `script` and run as it is, the task's
    // entrypoint and args unused (as the Go project runs it). With a `#!` line it is the
    // program; else the shell reads it, as a runtime server's shell does.
    if let Some(text) = source.and_then(|s| s.inline.clone()) {
        let executable = text.starts_with("#!");
        let (program, args) = match executable {
            true => (format!("./{INLINE_SCRIPT}"), Vec::new()),
            false => ("sh".to_string(), vec![INLINE_SCRIPT.to_string()]),
        };
        return Ok(Prepared {
            program,
            args,
            env,
            working_dir,
            entrypoint: Some(INLINE_SCRIPT.to_string()),
            function: None,
            source: Some(SourceFile {
                path: INLINE_SCRIPT.to_string(),
                text,
                executable,
            }),
            git: None,
        });
    }
    if let Some(entrypoint) = task
        .entrypoint
        .as_deref()
        .filter(|e| !e.is_empty() && !is_inside(e))
    {
        return Err(TaskError::Entrypoint(entrypoint.to_string()));
    }
    let (program, args) = match task.entrypoint.as_deref().filter(|e| !e.is_empty()) {
        // A relative script file (the API refuses absolute ones) in the working directory,
        // never a program looked up on PATH.
        Some(entrypoint) => (
            if entrypoint.contains('/') {
                entrypoint.to_string()
            } else {
                format!("./{entrypoint}")
            },
            task.args.as_slice(),
        ),
        None => task
            .args
            .split_first()
            .map(|(program, args)| (program.clone(), args))
            .ok_or(TaskError::EmptyArgs)?,
    };
    Ok(Prepared {
        program,
        args: args.to_vec(),
        env,
        working_dir,
        entrypoint: task.entrypoint.clone().filter(|e| !e.is_empty()),
        function: None,
        source: None,
        git,
    })
}

/// Whether a path (an entrypoint, a function's inline source) names a file inside the working
/// directory: relative, no `..` segment, not the directory itself. The API checks these
/// fields; a Run stored before those rules, or written around them, is refused here with the
/// field's name, and no file outside the Run's directory is ever written or run.
pub fn is_inside(path: &str) -> bool {
    use std::path::Component;
    let path = std::path::Path::new(path);
    !path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && path.components().any(|c| matches!(c, Component::Normal(_)))
}
