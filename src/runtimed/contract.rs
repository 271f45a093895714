//! How a Run maps onto the Runtime Server contract (pure): the execution id of a Run's attempt,
//! the `ExecuteRequest` of a prepared task, and the terminal status a server's
//! `StatusResponse` gives the Run (its outputs are the `$KRUNTIME_OUTPUTS` file's, read by the
//! agent, never the server's stdout). Never talks to the server (that is [`super::remote`]) nor to
//! the API server, and never decides admission.

use super::executor::{Prepared, Terminal};
use crate::api::status::{Outcome, reasons};
use crate::runtimed::proto::{ExecuteRequest, ExecutionState, StatusResponse};

/// The server's execution id of a Run's attempt: the Run's UID (names change, UIDs do not)
/// and its attempt, so a requeued Run's next attempt is a new execution and a restarted
/// runtimed finds the one it started.
pub fn execution_id(uid: &str, attempt: i32) -> String {
    format!("{uid}-{attempt}")
}

/// The `Execute` call for a prepared task: the program and its arguments as `args` (or the
/// entrypoint script with its arguments), the environment, the working directory and the
/// Run's timeout in seconds (0: none).
pub fn execute_request(id: &str, task: &Prepared, timeout_seconds: i64) -> ExecuteRequest {
    let (entrypoint, args) = match (&task.entrypoint, &task.source) {
        // An inline script is the task, sent as the Go project's runtimed sends it: the
        // script, no arguments (the server runs it with its own interpreter, Bash or Python;
        // `args` is how runtimed's own shell would run it, a stray `$1` to a server).
        (Some(entrypoint), Some(_)) => (entrypoint.clone(), Vec::new()),
        (Some(entrypoint), None) => (entrypoint.clone(), task.args.clone()),
        (None, _) => (
            String::new(),
            std::iter::once(task.program.clone())
                .chain(task.args.iter().cloned())
                .collect(),
        ),
    };
    ExecuteRequest {
        id: id.to_string(),
        args,
        env: task.env.iter().cloned().collect(),
        timeout_seconds,
        working_dir: task.working_dir.clone().unwrap_or_default(),
        entrypoint,
        handler: String::new(),
    }
}

/// The terminal status of a finished execution: Succeeded with exit code 0 (or the server's
/// code), Failed with its exit code and the server's error message when it gives one.
pub fn ended(status: &StatusResponse) -> Option<Terminal> {
    let state = ExecutionState::try_from(status.state).unwrap_or(ExecutionState::Unspecified);
    let terminal = match state {
        ExecutionState::Unspecified | ExecutionState::Pending | ExecutionState::Running => {
            return None;
        }
        ExecutionState::Succeeded => Terminal {
            outcome: Outcome::Succeeded,
            reason: reasons::SUCCEEDED,
            message: crate::api::status::SUCCESS_MESSAGE.to_string(),
            exit_code: Some(status.exit_code),
        },
        ExecutionState::Failed => {
            let error = bounded(&status.error_message, 512);
            Terminal {
                outcome: Outcome::Failed,
                reason: reasons::EXIT_CODE,
                message: match error.is_empty() {
                    true => format!(
                        "the runtime server's execution exited with code {}",
                        status.exit_code
                    ),
                    false => format!(
                        "the runtime server's execution failed (exit code {}): {error}",
                        status.exit_code
                    ),
                },
                exit_code: Some(status.exit_code),
            }
        }
    };
    Some(terminal)
}

/// The longest prefix of `text` of at most `limit` bytes that ends at a character boundary.
fn bounded(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ExecutionState, code: i32) -> StatusResponse {
        StatusResponse {
            id: "uid-a-1".into(),
            state: state as i32,
            exit_code: code,
            ..Default::default()
        }
    }

    #[test]
    fn an_execution_ends_only_in_a_terminal_state() {
        assert_eq!(ended(&status(ExecutionState::Running, 0)), None);
        assert_eq!(ended(&status(ExecutionState::Pending, 0)), None);
        assert_eq!(ended(&status(ExecutionState::Unspecified, 0)), None);
        let ok = ended(&status(ExecutionState::Succeeded, 0)).unwrap();
        assert_eq!(ok.outcome, Outcome::Succeeded);
        assert_eq!(ok.exit_code, Some(0));
        let failed = ended(&StatusResponse {
            error_message: "boom".into(),
            ..status(ExecutionState::Failed, 3)
        })
        .unwrap();
        assert_eq!(
            (failed.outcome, failed.reason),
            (Outcome::Failed, reasons::EXIT_CODE)
        );
        assert_eq!(
            failed.message,
            "the runtime server's execution failed (exit code 3): boom"
        );
    }

    #[test]
    fn a_program_and_its_args_go_as_args_an_entrypoint_separately() {
        let task = Prepared {
            program: "sh".into(),
            args: vec!["-c".into(), "exit 3".into()],
            env: vec![("A".into(), "1".into())],
            working_dir: Some("/work".into()),
            entrypoint: None,
            function: None,
            source: None,
            git: None,
        };
        let req = execute_request("uid-a-1", &task, 30);
        assert_eq!(req.args, vec!["sh", "-c", "exit 3"]);
        assert_eq!(req.entrypoint, "");
        assert_eq!(
            (req.timeout_seconds, req.working_dir.as_str()),
            (30, "/work")
        );
        assert_eq!(req.env.get("A").map(String::as_str), Some("1"));
        let script = Prepared {
            entrypoint: Some("main.sh".into()),
            program: "./main.sh".into(),
            ..task
        };
        let req = execute_request("uid-a-1", &script, 0);
        assert_eq!((req.entrypoint.as_str(), req.args.len()), ("main.sh", 2));
        assert_eq!(execution_id("uid-a", 2), "uid-a-2");
        let inline = super::super::executor::prepare(
            Some(&Default::default()),
            &[],
            Some(&crate::api::CodeSource {
                inline: Some("print('hi')".into()),
                ..Default::default()
            }),
        )
        .unwrap();
        let req = execute_request("uid-a-1", &inline, 0);
        assert_eq!(
            (req.entrypoint.as_str(), req.args),
            ("script", Vec::<String>::new()),
            "an inline script goes alone, as the Go project's runtimed sends it"
        );
    }
}
