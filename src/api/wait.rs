//! What a Run is waited for (`--for` of `wait`, the end `run --wait` follows) and the one
//! judgement of a Run against it ([`judge`]). Pure: no client, no clock; the commands
//! (the `wait` and `run` commands) watch, this module only judges what they saw.

use super::{Run, RunPhase};

/// What a Run is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum For {
    /// `phase=P`: the Run's phase is P.
    Phase(RunPhase),
    /// `condition=TYPE[=STATUS]`: the condition TYPE has STATUS (`True` when not given).
    Condition { type_: String, status: String },
    /// `delete`: the Run is gone.
    Delete,
    /// `ended`: the Run has ended, whatever the outcome, or is gone (what `cancel --wait`
    /// waits for).
    Ended,
}

impl For {
    /// What it waits for, as a sentence goes on after "has not".
    pub fn said(&self) -> String {
        match self {
            For::Phase(p) => format!("reached phase {}", p.as_str()),
            For::Condition { type_, status } => format!("met condition {type_}={status}"),
            For::Delete => "been deleted".into(),
            For::Ended => "ended".into(),
        }
    }
}

impl Default for For {
    fn default() -> Self {
        For::Phase(RunPhase::Succeeded)
    }
}

/// Parses `--for`, naming what it takes when it is not one of them.
pub fn parse_for(s: &str) -> Result<For, String> {
    let takes = "use phase=PHASE, condition=TYPE[=STATUS], ended or delete, e.g. --for=phase=Succeeded or --for=condition=Finished";
    match s {
        "delete" => return Ok(For::Delete),
        "ended" => return Ok(For::Ended),
        _ => {}
    }
    if let Some(phase) = s.strip_prefix("phase=") {
        return RunPhase::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(phase))
            .map(For::Phase)
            .ok_or_else(|| {
                let all: Vec<&str> = RunPhase::ALL.iter().map(|p| p.as_str()).collect();
                format!(
                    "--for={s}: {phase:?} is not a Run phase ({})",
                    all.join(", ")
                )
            });
    }
    if let Some(condition) = s.strip_prefix("condition=") {
        let (type_, status) = condition.split_once('=').unwrap_or((condition, "True"));
        if type_.is_empty() || status.is_empty() {
            return Err(format!("--for={s}: {takes}"));
        }
        return Ok(For::Condition {
            type_: type_.to_string(),
            status: status.to_string(),
        });
    }
    Err(format!("--for={s}: {takes}"))
}

/// Where a Run stands against what it is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Waiting,
    Met,
    /// It can never be met any more: why.
    Never(String),
}

/// Judges `run` (`None`: deleted) against `wanted`. A Run that has ended never changes again,
/// so an end that does not meet `wanted` is final.
pub fn judge(run: Option<&Run>, wanted: &For) -> Verdict {
    let Some(run) = run else {
        return match wanted {
            For::Delete | For::Ended => Verdict::Met,
            _ => Verdict::Never("it was deleted".into()),
        };
    };
    let phase = run.phase();
    let met = match wanted {
        For::Phase(p) => phase == *p,
        For::Condition { type_, status } => run
            .status
            .iter()
            .flat_map(|s| &s.conditions)
            .any(|c| c.type_ == *type_ && c.status.eq_ignore_ascii_case(status)),
        For::Delete => false,
        For::Ended => phase.is_terminal(),
    };
    if met {
        Verdict::Met
    } else if phase.is_terminal() && *wanted != For::Delete {
        Verdict::Never(ended(run))
    } else {
        Verdict::Waiting
    }
}

/// "it ended Failed (NonZeroExitCode): exited with code 3".
pub fn ended(run: &Run) -> String {
    let status = run.status.clone().unwrap_or_default();
    let mut said = format!("it ended {}", run.phase().as_str());
    if let Some(reason) = status.reason.filter(|r| !r.is_empty()) {
        said.push_str(&format!(" ({reason})"));
    }
    if let Some(message) = status.message.filter(|m| !m.is_empty()) {
        said.push_str(&format!(": {message}"));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::{self, Outcome, reasons};
    use crate::testing::run;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ended_as(outcome: Outcome, reason: &str, message: &str) -> Run {
        let mut r = run("a").running().build();
        let status = r.status.get_or_insert_with(Default::default);
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        status::set_terminal(status, outcome, reason, message, None, &now);
        r
    }

    #[test]
    fn for_takes_a_phase_a_condition_or_delete_and_names_what_it_takes_otherwise() {
        assert_eq!(parse_for("phase=failed"), Ok(For::Phase(RunPhase::Failed)));
        assert_eq!(
            parse_for("condition=Finished"),
            Ok(For::Condition {
                type_: "Finished".into(),
                status: "True".into()
            })
        );
        assert_eq!(
            parse_for("condition=Completed=False"),
            Ok(For::Condition {
                type_: "Completed".into(),
                status: "False".into()
            })
        );
        assert_eq!(parse_for("delete"), Ok(For::Delete));
        let err = parse_for("phase=Done").unwrap_err();
        assert!(
            err.contains("\"Done\" is not a Run phase (Pending, Scheduled"),
            "{err}"
        );
        assert!(
            parse_for("jsonpath={.x}")
                .unwrap_err()
                .contains("phase=PHASE")
        );
    }

    #[test]
    fn a_failed_end_is_final_for_a_success_but_meets_finished() {
        let failed = ended_as(Outcome::Failed, reasons::EXIT_CODE, "exited with code 3");
        assert_eq!(
            judge(Some(&failed), &For::default()),
            Verdict::Never("it ended Failed (NonZeroExitCode): exited with code 3".into())
        );
        let finished = parse_for("condition=Finished").unwrap();
        assert_eq!(judge(Some(&failed), &finished), Verdict::Met);
        let ok = ended_as(
            Outcome::Succeeded,
            reasons::SUCCEEDED,
            "execution completed",
        );
        assert_eq!(judge(Some(&ok), &For::default()), Verdict::Met);
        let running = run("b").running().build();
        assert_eq!(judge(Some(&running), &finished), Verdict::Waiting);
        assert_eq!(judge(Some(&running), &For::Delete), Verdict::Waiting);
        assert_eq!(judge(None, &For::Delete), Verdict::Met);
        assert_eq!(judge(Some(&failed), &For::Ended), Verdict::Met);
        assert_eq!(judge(Some(&running), &For::Ended), Verdict::Waiting);
        assert_eq!(judge(None, &For::Ended), Verdict::Met);
        assert_eq!(parse_for("ended"), Ok(For::Ended));
        assert!(matches!(judge(None, &finished), Verdict::Never(_)));
    }
}
