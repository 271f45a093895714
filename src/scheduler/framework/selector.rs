//! Compiled Run label selectors: validated once in PreFilter, then matched many times.
//!
//! Owns the meaning of a `LabelSelector` over Run labels (`matchLabels` and
//! `matchExpressions` are ANDed; an empty selector matches every Run). It must not know about
//! Pods, indexes or affinity rules: callers decide what a match means.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use thiserror::Error;

pub type Result<T, E = SelectorError> = std::result::Result<T, E>;

/// Why a label selector was refused. Every message names the field and the offending value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    #[error("{field}: {value:?} is not a valid operator: use In, NotIn, Exists or DoesNotExist")]
    Operator { field: String, value: String },
    #[error("{field}: operator {operator} needs at least one value")]
    MissingValues {
        field: String,
        operator: &'static str,
    },
    #[error("{field}: operator {operator} takes no values, got {count}")]
    UnexpectedValues {
        field: String,
        operator: &'static str,
        count: usize,
    },
}

impl SelectorError {
    /// The path of the refused field.
    pub fn field(&self) -> &str {
        match self {
            SelectorError::Operator { field, .. }
            | SelectorError::MissingValues { field, .. }
            | SelectorError::UnexpectedValues { field, .. } => field,
        }
    }
}

/// A selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Operator {
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
        }
    }
}

/// One requirement: `key <op> values`. `matchLabels` entries become `In` with one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    /// Sorted and deduplicated; empty for `Exists` / `DoesNotExist`.
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.has_value(v)),
            Operator::NotIn => value.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }

    fn has_value(&self, v: &str) -> bool {
        self.values
            .binary_search_by(|probe| probe.as_str().cmp(v))
            .is_ok()
    }
}

/// A validated label selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Validates `selector`; `field` is its path in the Run (e.g.
    /// `spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector`) and prefixes every error.
    pub fn compile(selector: &LabelSelector, field: &str) -> Result<Self> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: key.clone(),
                operator: Operator::In,
                values: vec![value.clone()],
            });
        }
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            let field = format!("{field}.matchExpressions[{i}]");
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::Operator {
                        field: format!("{field}.operator"),
                        value: other.to_string(),
                    });
                }
            };
            let mut values = expr.values.clone().unwrap_or_default();
            match operator {
                Operator::In | Operator::NotIn if values.is_empty() => {
                    return Err(SelectorError::MissingValues {
                        field: format!("{field}.values"),
                        operator: operator.as_str(),
                    });
                }
                Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                    return Err(SelectorError::UnexpectedValues {
                        field: format!("{field}.values"),
                        operator: operator.as_str(),
                        count: values.len(),
                    });
                }
                _ => {}
            }
            values.sort();
            values.dedup();
            requirements.push(Requirement {
                key: expr.key.clone(),
                operator,
                values,
            });
        }
        Ok(Selector { requirements })
    }

    /// Compiles a selector from `matchLabels` only (tests and benches).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Selector {
            requirements: labels
                .into_iter()
                .map(|(k, v)| Requirement {
                    key: k.to_string(),
                    operator: Operator::In,
                    values: vec![v.to_string()],
                })
                .collect(),
        }
    }

    /// Whether every requirement holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the selector asks for label values (`a=x`, possibly with bare `Exists` keys)
    /// and nothing else, so a Run it wants can be described as "labelled a=x".
    pub fn labels_only(&self) -> bool {
        let single = |r: &Requirement| r.operator == Operator::In && r.values.len() == 1;
        self.requirements.iter().any(single)
            && self
                .requirements
                .iter()
                .all(|r| single(r) || r.operator == Operator::Exists)
    }

    /// Requirements that a label index can answer positively (`In`, `Exists`): any Run
    /// matching the selector carries one of their (key, value) pairs. Selectors without one
    /// (only `NotIn` / `DoesNotExist`, or empty) have to be evaluated by scanning.
    pub fn indexable(&self) -> impl Iterator<Item = &Requirement> {
        self.requirements
            .iter()
            .filter(|r| matches!(r.operator, Operator::In | Operator::Exists))
    }
}

/// kubectl's syntax: `k=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`; an empty selector
/// (matching every Run) is `<all Runs>`.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirements.is_empty() {
            return f.write_str("<all Runs>");
        }
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r.operator {
                Operator::In if r.values.len() == 1 => write!(f, "{}={}", r.key, r.values[0])?,
                Operator::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                Operator::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                Operator::Exists => f.write_str(&r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_string(),
            operator: op.to_string(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        exprs: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    #[test]
    fn selectors_match_labels_and_expressions_together() {
        let s = Selector::compile(
            &selector(
                &[("cohort", "a")],
                vec![
                    expr("tier", "In", Some(&["gold", "silver"])),
                    expr("team", "NotIn", Some(&["x"])),
                    expr("owner", "Exists", None),
                    expr("legacy", "DoesNotExist", None),
                ],
            ),
            "sel",
        )
        .unwrap();
        let base = [("cohort", "a"), ("tier", "gold"), ("owner", "me")];
        let table: &[(&[(&str, &str)], bool)] = &[
            (&base, true),
            (
                &[
                    ("cohort", "a"),
                    ("tier", "silver"),
                    ("owner", "me"),
                    ("team", "y"),
                ],
                true,
            ),
            (&[("cohort", "b"), ("tier", "gold"), ("owner", "me")], false),
            (
                &[("cohort", "a"), ("tier", "bronze"), ("owner", "me")],
                false,
            ),
            (
                &[
                    ("cohort", "a"),
                    ("tier", "gold"),
                    ("owner", "me"),
                    ("team", "x"),
                ],
                false,
            ),
            (&[("cohort", "a"), ("tier", "gold")], false),
            (
                &[
                    ("cohort", "a"),
                    ("tier", "gold"),
                    ("owner", "me"),
                    ("legacy", "1"),
                ],
                false,
            ),
        ];
        for (run_labels, want) in table {
            assert_eq!(s.matches(&labels(run_labels)), *want, "{run_labels:?}");
        }
    }

    #[test]
    fn an_empty_selector_matches_every_run() {
        let s = Selector::compile(&LabelSelector::default(), "sel").unwrap();
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
        assert_eq!(s.indexable().count(), 0);
    }

    #[test]
    fn invalid_selectors_name_the_field_and_value() {
        let table = [
            (
                expr("k", "Equals", Some(&["v"])),
                "sel.matchExpressions[0].operator: \"Equals\" is not a valid operator: use In, NotIn, Exists or DoesNotExist",
            ),
            (
                expr("k", "In", None),
                "sel.matchExpressions[0].values: operator In needs at least one value",
            ),
            (
                expr("k", "NotIn", Some(&[])),
                "sel.matchExpressions[0].values: operator NotIn needs at least one value",
            ),
            (
                expr("k", "Exists", Some(&["v"])),
                "sel.matchExpressions[0].values: operator Exists takes no values, got 1",
            ),
        ];
        for (e, want) in table {
            let err = Selector::compile(&selector(&[], vec![e]), "sel").unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn only_in_and_exists_requirements_are_indexable() {
        let s = Selector::compile(
            &selector(
                &[("cohort", "a")],
                vec![
                    expr("team", "NotIn", Some(&["x"])),
                    expr("owner", "Exists", None),
                    expr("legacy", "DoesNotExist", None),
                ],
            ),
            "sel",
        )
        .unwrap();
        let keys: Vec<_> = s.indexable().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["cohort", "owner"]);
    }

    #[test]
    fn selectors_read_like_kubectl() {
        use crate::testing::selector_expr;
        let table = [
            (selector_expr(&[("a", "In", &["x"])]), "a=x", true),
            (
                selector_expr(&[("a", "In", &["y", "x"])]),
                "a in (x,y)",
                false,
            ),
            (
                selector_expr(&[("a", "NotIn", &["x"])]),
                "a notin (x)",
                false,
            ),
            (
                selector_expr(&[("a", "Exists", &[]), ("b", "DoesNotExist", &[])]),
                "a,!b",
                false,
            ),
            (
                selector_expr(&[("a", "In", &["x"]), ("b", "Exists", &[])]),
                "a=x,b",
                true,
            ),
            (Selector::default(), "<all Runs>", false),
        ];
        for (selector, want, labels_only) in table {
            assert_eq!(selector.to_string(), want);
            assert_eq!(selector.labels_only(), labels_only, "{want}");
        }
    }
}
