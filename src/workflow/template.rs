//! What a reusable Workflow or an Action becomes when it is called: its declared inputs bound
//! to the caller's values (defaults, unknown and missing inputs), a Workflow's jobs with those
//! inputs written in, and the check that the Workflows a call reaches form no cycle and are not
//! nested too deep. Pure: the caller looks Workflows up; this never reads the API.

use std::collections::BTreeMap;

use crate::api::{InputSpec, JobSpec, WorkflowSpec};

use super::expr;

/// How deep reusable Workflow calls may nest, the called Workflow included.
pub const MAX_CALL_DEPTH: usize = 8;

/// The value of every declared input: the caller's, else the default. An input the caller
/// passes that is not declared, or a required one with neither value nor default, is an error.
pub fn bind(
    declared: &BTreeMap<String, InputSpec>,
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    if let Some(unknown) = values.keys().find(|name| !declared.contains_key(*name)) {
        return Err(format!("unknown input {unknown:?}"));
    }
    declared
        .iter()
        .map(|(name, input)| match values.get(name) {
            Some(value) => Ok((name.clone(), value.clone())),
            None if input.required && input.default.is_empty() => {
                Err(format!("missing required input {name:?}"))
            }
            None => Ok((name.clone(), input.default.clone())),
        })
        .collect()
}

/// The jobs of `spec` with its inputs, bound from `values`, written into every field a step or
/// a call reads. Expressions of outputs stay: the controller resolves them when they exist.
pub fn materialize(
    spec: &WorkflowSpec,
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, JobSpec>, String> {
    let inputs = bind(&spec.inputs, values)?;
    let text = |value: &str, what: &dyn Fn() -> String| {
        expr::bind_inputs(value, &inputs).map_err(|e| format!("{}: {e}", what()))
    };
    let map = |values: &BTreeMap<String, String>, what: &dyn Fn() -> String| {
        values
            .iter()
            .map(|(k, v)| Ok((k.clone(), text(v, what)?)))
            .collect::<Result<BTreeMap<_, _>, String>>()
    };
    let mut jobs = BTreeMap::new();
    for (name, job) in &spec.jobs {
        let mut bound = job.clone();
        bound.uses = text(&job.uses, &|| format!("job {name:?} uses"))?;
        bound.with = map(&job.with, &|| format!("job {name:?} with"))?;
        bound.outputs = map(&job.outputs, &|| format!("job {name:?} outputs"))?;
        for step in &mut bound.steps {
            let at = |field: &str| {
                let (name, step, field) = (name.clone(), step.name.clone(), field.to_string());
                move || format!("job {name:?} step {step:?} {field}")
            };
            step.run = text(&step.run, &at("run"))?;
            step.args = step
                .args
                .iter()
                .map(|arg| text(arg, &at("args")))
                .collect::<Result<_, _>>()?;
            step.env = map(&step.env, &at("env"))?;
            step.with = map(&step.with, &at("with"))?;
        }
        jobs.insert(name.clone(), bound);
    }
    Ok(jobs)
}

/// Checks the reusable Workflows reachable from `root`: each exists (`lookup` says `Ok(None)`
/// when it does not), none calls back into one that is calling it, and no chain is deeper than
/// [`MAX_CALL_DEPTH`]. Callees are visited in name order, so the error is stable.
pub fn check_calls<E: std::fmt::Display>(
    root: &str,
    mut lookup: impl FnMut(&str) -> Result<Option<WorkflowSpec>, E>,
) -> Result<(), String> {
    #[derive(PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    fn visit<E: std::fmt::Display>(
        name: &str,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
        lookup: &mut dyn FnMut(&str) -> Result<Option<WorkflowSpec>, E>,
    ) -> Result<(), String> {
        match marks.get(name) {
            Some(Mark::Done) => return Ok(()),
            Some(Mark::Visiting) => {
                let from = stack.iter().position(|n| n == name).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(name.to_string());
                return Err(format!("workflow call cycle: {}", cycle.join(" -> ")));
            }
            None => {}
        }
        if stack.len() >= MAX_CALL_DEPTH {
            let mut path = stack.clone();
            path.push(name.to_string());
            return Err(format!(
                "workflow calls nest deeper than {MAX_CALL_DEPTH}: {}",
                path.join(" -> ")
            ));
        }
        let spec = match lookup(name) {
            Ok(Some(spec)) => spec,
            Ok(None) => return Err(format!("Workflow {name:?} does not exist")),
            Err(e) => return Err(format!("cannot read Workflow {name:?}: {e}")),
        };
        marks.insert(name.to_string(), Mark::Visiting);
        stack.push(name.to_string());
        let callees: std::collections::BTreeSet<&str> = spec
            .jobs
            .values()
            .filter(|job| job.calls_workflow())
            .map(|job| job.uses.as_str())
            .collect();
        for callee in callees {
            visit(callee, marks, stack, lookup)?;
        }
        stack.pop();
        marks.insert(name.to_string(), Mark::Done);
        Ok(())
    }
    visit(root, &mut BTreeMap::new(), &mut Vec::new(), &mut lookup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StepSpec;

    fn input(required: bool, default: &str) -> InputSpec {
        InputSpec {
            required,
            default: default.into(),
            ..InputSpec::default()
        }
    }

    fn calling(callees: &[&str]) -> WorkflowSpec {
        let jobs = callees
            .iter()
            .map(|c| {
                let job = JobSpec {
                    uses: c.to_string(),
                    ..JobSpec::default()
                };
                (format!("call-{c}"), job)
            })
            .collect();
        WorkflowSpec {
            jobs,
            ..WorkflowSpec::default()
        }
    }

    #[test]
    fn inputs_bind_to_values_or_defaults_and_refuse_the_unknown_and_the_missing() {
        let declared: BTreeMap<_, _> = [
            ("a".to_string(), input(true, "")),
            ("b".to_string(), input(false, "dflt")),
            ("c".to_string(), input(true, "given")),
        ]
        .into();
        let values = [("a".to_string(), "x".to_string())].into();
        let bound = bind(&declared, &values).unwrap();
        assert_eq!(bound["a"], "x");
        assert_eq!(bound["b"], "dflt");
        assert_eq!(bound["c"], "given");
        assert_eq!(
            bind(&declared, &BTreeMap::new()).unwrap_err(),
            "missing required input \"a\""
        );
        let extra = [("zz".to_string(), String::new())].into();
        assert_eq!(bind(&declared, &extra).unwrap_err(), "unknown input \"zz\"");
    }

    #[test]
    fn materializing_writes_inputs_into_steps_and_keeps_output_expressions() {
        let step = StepSpec {
            name: "s".into(),
            run: "echo ${{ inputs.m }} ${{ steps.x.outputs.y }}".into(),
            env: [("M".to_string(), "${{inputs.m}}".to_string())].into(),
            args: vec!["${{ inputs.m }}".into()],
            ..StepSpec::default()
        };
        let spec = WorkflowSpec {
            inputs: [("m".to_string(), input(true, ""))].into(),
            jobs: [(
                "j".to_string(),
                JobSpec {
                    runs_on: "bash".into(),
                    steps: vec![step],
                    ..JobSpec::default()
                },
            )]
            .into(),
            ..WorkflowSpec::default()
        };
        let jobs = materialize(&spec, &[("m".to_string(), "hi".to_string())].into()).unwrap();
        let step = &jobs["j"].steps[0];
        assert_eq!(step.run, "echo hi ${{ steps.x.outputs.y }}");
        assert_eq!(step.env["M"], "hi");
        assert_eq!(step.args, ["hi"]);
    }

    #[test]
    fn a_call_cycle_and_a_missing_workflow_are_refused_by_name() {
        let workflows: BTreeMap<&str, WorkflowSpec> = [
            ("a", calling(&["b"])),
            ("b", calling(&["c"])),
            ("c", calling(&["a"])),
        ]
        .into();
        let lookup = |n: &str| Ok::<_, String>(workflows.get(n).cloned());
        assert_eq!(
            check_calls("a", lookup).unwrap_err(),
            "workflow call cycle: a -> b -> c -> a"
        );
        let lookup = |n: &str| Ok::<_, String>((n == "a").then(|| calling(&["gone"])));
        assert_eq!(
            check_calls("a", lookup).unwrap_err(),
            "Workflow \"gone\" does not exist"
        );
    }

    #[test]
    fn calls_nest_at_most_the_maximum_depth() {
        let chain = |depth: usize| {
            move |n: &str| {
                let level: usize = n[1..].parse().unwrap();
                let next = format!("w{}", level + 1);
                Ok::<_, String>(Some(if level + 1 < depth {
                    calling(&[next.as_str()])
                } else {
                    calling(&[])
                }))
            }
        };
        assert!(check_calls("w0", chain(MAX_CALL_DEPTH)).is_ok());
        let err = check_calls("w0", chain(MAX_CALL_DEPTH + 1)).unwrap_err();
        assert!(
            err.starts_with("workflow calls nest deeper than 8"),
            "{err}"
        );
    }
}
