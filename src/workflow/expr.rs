//! `${{ }}` expressions: `inputs.NAME`, `steps.STEP.outputs.KEY` and `jobs.JOB.outputs.KEY`,
//! replaced in a string by the values a [`Scope`] holds. Pure: it owns the grammar and what
//! a reference resolves to, never where the values come from.

use std::collections::BTreeMap;

/// The values an expression may read where it is evaluated.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// The bound inputs of a reusable Workflow or an Action (`None`: there are none here).
    pub inputs: Option<BTreeMap<String, String>>,
    /// The outputs of this job's (or Action's) steps that succeeded, by step name.
    pub steps: Option<BTreeMap<String, BTreeMap<String, String>>>,
    /// The outputs of the jobs that succeeded, by job name.
    pub jobs: Option<BTreeMap<String, BTreeMap<String, String>>>,
}

/// One expression found in a string: the byte range of `${{ … }}` and its trimmed body.
struct Found<'a> {
    start: usize,
    end: usize,
    body: &'a str,
}

/// The expressions of `text`, left to right. A body is what lies between `${{` and the next
/// `}}`, trimmed; an empty body or one that spans lines is not an expression (it stays text).
fn expressions(text: &str) -> Vec<Found<'_>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("${{").map(|i| from + i) {
        let inner = open + 3;
        let Some(close) = text[inner..].find("}}").map(|i| inner + i) else {
            break;
        };
        let body = text[inner..close].trim();
        if body.is_empty() || body.contains('\n') {
            from = inner;
            continue;
        }
        found.push(Found {
            start: open,
            end: close + 2,
            body,
        });
        from = close + 2;
    }
    found
}

/// `text` with each expression for which `value` returns `Some` replaced; the first error
/// `value` returns is the result.
fn replace(
    text: &str,
    mut value: impl FnMut(&str) -> Option<Result<String, String>>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for found in expressions(text) {
        let Some(resolved) = value(found.body) else {
            continue;
        };
        out.push_str(&text[last..found.start]);
        out.push_str(&resolved?);
        last = found.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// `text` with every expression resolved in `scope`, or why one cannot be.
pub fn resolve(text: &str, scope: &Scope) -> Result<String, String> {
    replace(text, |body| Some(reference(body, scope)))
}

/// `text` with only its `${{ inputs.NAME }}` expressions replaced from `inputs` (an unknown
/// name is an error); every other expression stays for later, when what it reads exists.
pub fn bind_inputs(text: &str, inputs: &BTreeMap<String, String>) -> Result<String, String> {
    replace(text, |body| {
        let name = body.strip_prefix("inputs.")?;
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        valid.then(|| {
            inputs
                .get(name)
                .cloned()
                .ok_or_else(|| format!("unknown input {name:?}"))
        })
    })
}

/// What one reference names in `scope`.
fn reference(path: &str, scope: &Scope) -> Result<String, String> {
    let parts: Vec<&str> = path.splitn(4, '.').collect();
    match parts[0] {
        "inputs" => {
            let [_, name] = parts[..] else {
                return Err(format!(
                    "invalid inputs reference {path:?}: expected inputs.NAME"
                ));
            };
            let inputs = scope
                .inputs
                .as_ref()
                .ok_or("no inputs are available here")?;
            inputs
                .get(name)
                .cloned()
                .ok_or_else(|| format!("no input {name:?}"))
        }
        kind @ ("steps" | "jobs") => {
            let [_, owner, "outputs", key] = parts[..] else {
                return Err(format!(
                    "invalid {kind} reference {path:?}: expected {kind}.NAME.outputs.KEY"
                ));
            };
            let outputs = if kind == "steps" {
                &scope.steps
            } else {
                &scope.jobs
            };
            let outputs = outputs.as_ref().ok_or("no outputs are available here")?;
            let of = outputs
                .get(owner)
                .ok_or_else(|| format!("no outputs for {owner}"))?;
            of.get(key)
                .cloned()
                .ok_or_else(|| format!("no output {key:?} in {owner}"))
        }
        other => Err(format!(
            "unknown reference {other:?}: expected inputs, steps or jobs"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn references_resolve_from_their_scope() {
        let scope = Scope {
            inputs: Some(map(&[("who", "world")])),
            steps: Some([("build".into(), map(&[("url", "u.example")]))].into()),
            jobs: Some([("a".into(), map(&[("k.dotted", "v")]))].into()),
        };
        let text =
            "hi ${{ inputs.who }} ${{steps.build.outputs.url}} ${{ jobs.a.outputs.k.dotted }}";
        assert_eq!(resolve(text, &scope).unwrap(), "hi world u.example v");
    }

    #[test]
    fn an_unknown_reference_names_what_is_missing() {
        let scope = Scope {
            steps: Some(BTreeMap::new()),
            ..Scope::default()
        };
        assert_eq!(
            resolve("${{ steps.x.outputs.y }}", &scope).unwrap_err(),
            "no outputs for x"
        );
        assert!(
            resolve("${{ inputs.x }}", &scope)
                .unwrap_err()
                .contains("no inputs")
        );
        assert!(
            resolve("${{ env.HOME }}", &scope)
                .unwrap_err()
                .contains("unknown reference")
        );
        assert!(
            resolve("${{ steps.x.y }}", &scope)
                .unwrap_err()
                .contains("expected steps.NAME")
        );
    }

    #[test]
    fn text_that_is_not_an_expression_stays() {
        let scope = Scope::default();
        for text in [
            "plain",
            "${{ }}",
            "${{ unclosed",
            "$ {{ inputs.x }}",
            "${{ a\nb }}",
        ] {
            assert_eq!(resolve(text, &scope).unwrap(), text);
        }
    }

    #[test]
    fn binding_inputs_leaves_later_expressions_for_later() {
        let inputs = map(&[("msg", "hello")]);
        let text = "${{ inputs.msg }} ${{ jobs.a.outputs.b }}";
        assert_eq!(
            bind_inputs(text, &inputs).unwrap(),
            "hello ${{ jobs.a.outputs.b }}"
        );
        assert_eq!(
            bind_inputs("${{ inputs.nope }}", &inputs).unwrap_err(),
            "unknown input \"nope\""
        );
    }
}
