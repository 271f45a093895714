//! What a Runtime Pod may do: the ValidatingAdmissionPolicy (and its binding) that restricts
//! the `kubectl-kruntimes-runtimed[-<runtime>]` service accounts to their own Pod's Runs and
//! heartbeat Lease, and the check that tells the scheduler whether it is installed and denies
//! (without it the Runtime controller creates no Runtime Pod: [`refusal`]).
//!
//! The policy itself is `deploy/crds/runtimed-policy.yaml`, embedded here so that `install` applies
//! and prints exactly the shipped file. This module does not apply anything (`install`
//! does); it only parses the manifest and reads whether the cluster has it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Client;
use kube::api::Api;
use thiserror::Error;

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-runtimed";

/// `deploy/crds/runtimed-policy.yaml`, as shipped.
pub const MANIFEST: &str = include_str!("../../deploy/crds/runtimed-policy.yaml");

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{0}")]
    Manifest(String),
}

/// The policy and its binding, parsed from [`MANIFEST`].
pub fn objects() -> Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    super::pair("deploy/crds/runtimed-policy.yaml", MANIFEST).map_err(Error::Manifest)
}

/// Whether the cluster enforces the policy, as far as the caller may read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// The policy and a binding of the same name exist, the binding denies, the policy's rules
    /// are the shipped ones and the API server's type check found nothing wrong with them.
    Installed,
    /// `kind` (ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding) is missing.
    Missing { kind: &'static str },
    /// It is there but would let writes through: `why`.
    Weakened { why: String },
    /// It could not be read (forbidden, unreachable, …).
    Unknown { error: String },
}

/// Reads the policy and its binding (two GETs) and [`judge`]s them.
pub async fn presence(client: &Client) -> Presence {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let unknown = |kind: &str, e: kube::Error| Presence::Unknown {
        error: match e {
            // The server's own sentence, not the debug form of its Status.
            kube::Error::Api(status) => format!("reading {kind} {NAME} failed: {}", status.message),
            other => format!("reading {kind} {NAME} failed: {other}"),
        },
    };
    let policy = match policies.get_opt(NAME).await {
        Ok(policy) => policy,
        Err(e) => return unknown("ValidatingAdmissionPolicy", e),
    };
    let binding = match bindings.get_opt(NAME).await {
        Ok(binding) => binding,
        Err(e) => return unknown("ValidatingAdmissionPolicyBinding", e),
    };
    judge(policy.as_ref(), binding.as_ref())
}

/// Whether `policy` and `binding`, as read from the cluster, enforce what the shipped
/// [`MANIFEST`] does. Pure. The rules (match constraints and conditions, variables,
/// validations, failure policy) must be the shipped ones: a policy edited to allow more is as
/// good as none. Where the API server's type check has run (kube-controller-manager writes it
/// into the status), it must have found nothing: an expression that does not compile fails
/// every write, or none.
pub fn judge(
    policy: Option<&ValidatingAdmissionPolicy>,
    binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> Presence {
    let Some(policy) = policy else {
        return Presence::Missing {
            kind: "ValidatingAdmissionPolicy",
        };
    };
    let Some(binding) = binding else {
        return Presence::Missing {
            kind: "ValidatingAdmissionPolicyBinding",
        };
    };
    let weakened = |why: String| Presence::Weakened { why };
    let actions = &binding.spec.validation_actions;
    let bound = &binding.spec.policy_name;
    if bound != NAME {
        return weakened(format!(
            "ValidatingAdmissionPolicyBinding {NAME} binds policy {bound:?}, not {NAME}"
        ));
    }
    if !actions.iter().any(|a| a == "Deny") {
        // Warn or Audit alone lets every refused write through.
        return weakened(format!(
            "ValidatingAdmissionPolicyBinding {NAME} has validationActions {actions:?}, which do not deny"
        ));
    }
    if binding.spec.match_resources.is_some() || binding.spec.param_ref.is_some() {
        return weakened(format!(
            "ValidatingAdmissionPolicyBinding {NAME} narrows what the policy matches (matchResources or paramRef), which the shipped binding does not"
        ));
    }
    let shipped = objects().ok().and_then(|(p, _)| p.spec);
    let (Some(shipped), Some(spec)) = (shipped, policy.spec.as_ref()) else {
        return weakened(format!("ValidatingAdmissionPolicy {NAME} has no spec"));
    };
    let rules = |s: &k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicySpec| {
        (
            s.failure_policy.clone(),
            s.match_conditions.clone(),
            s.variables.clone(),
            s.validations.clone(),
            s.match_constraints.as_ref().map(|m| {
                // The API server fills in each rule's scope ("*") when the file leaves it out.
                let unscoped = |rules: &Option<Vec<_>>| {
                    rules.clone().map(
                        |rules: Vec<
                            k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations,
                        >| {
                            rules
                                .into_iter()
                                .map(|mut r| {
                                    if r.scope.as_deref() == Some("*") {
                                        r.scope = None;
                                    }
                                    r
                                })
                                .collect::<Vec<_>>()
                        },
                    )
                };
                // What the API server fills in when the file says nothing: match every
                // namespace and object, equivalent versions.
                let everything =
                    |selector: &Option<
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
                    >| selector.clone().filter(|s| *s != Default::default());
                (
                    unscoped(&m.resource_rules),
                    unscoped(&m.exclude_resource_rules),
                    everything(&m.namespace_selector),
                    everything(&m.object_selector),
                    m.match_policy.clone().filter(|p| p != "Equivalent"),
                )
            }),
        )
    };
    // Compared as JSON with every run of whitespace in a string made one space: kustomize
    // re-folds the file's multi-line CEL (`kubectl apply -k`), which changes no rule.
    let comparable = |s| squeeze(serde_json::to_value(rules(s)).unwrap_or_default());
    if comparable(spec) != comparable(&shipped) {
        return weakened(format!(
            "ValidatingAdmissionPolicy {NAME} is not the one this release ships (its rules, match conditions or failure policy differ)"
        ));
    }
    let warnings: Vec<String> = policy
        .status
        .iter()
        .filter_map(|s| s.type_checking.as_ref())
        .flat_map(|t| t.expression_warnings.iter().flatten())
        .map(|w| format!("{}: {}", w.field_ref, w.warning))
        .collect();
    if let Some(first) = warnings.first() {
        return weakened(format!(
            "the API server's type check of ValidatingAdmissionPolicy {NAME} found {} problem(s), first {}",
            warnings.len(),
            first.chars().take(300).collect::<String>()
        ));
    }
    Presence::Installed
}

/// `value` with every string's whitespace runs made single spaces (and trimmed).
fn squeeze(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Value::Array(items) => Value::Array(items.into_iter().map(squeeze).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, squeeze(v))).collect())
        }
        other => other,
    }
}

/// Why the Runtime controller creates no Runtime Pod under `presence`, if it may not: a Pod's
/// token is only safe to hand out while the policy is installed and denies (fail closed: a
/// policy that cannot be read counts as missing). Said on the Runtime (`ReplicaFailure`).
pub fn refusal(presence: &Presence) -> Option<String> {
    let why = match presence {
        Presence::Installed => return None,
        Presence::Missing { kind } => format!("{kind} {NAME} is not installed"),
        Presence::Weakened { why } => why.clone(),
        Presence::Unknown { error } => error.clone(),
    };
    Some(format!(
        "not creating Runtime Pods: {why}, and without it a task could use its Pod's token to change other Runs' status; run `kubectl kruntimes install` (or `kubectl apply -k deploy/crds/`)"
    ))
}

/// The one warning `scheduler run` logs at start for `presence`, if any. `cluster` names the
/// cluster ("context X (server Y)").
pub fn warning(presence: &Presence, cluster: &str) -> Option<String> {
    match presence {
        Presence::Installed => None,
        Presence::Missing { kind } => Some(format!(
            "Runtime Pods are not restricted: {kind} {NAME} is not installed in {cluster}, so the task of any Run can use its Pod's token to change other Runs' status and other Pods' heartbeat Leases in its namespace; run `kubectl kruntimes install` to install it"
        )),
        Presence::Weakened { why } => Some(format!(
            "Runtime Pods are not restricted in {cluster}: {why}; run `kubectl kruntimes install` to restore it"
        )),
        Presence::Unknown { error } => Some(format!(
            "cannot tell whether Runtime Pods are restricted in {cluster}: {error}; grant get on validatingadmissionpolicies and validatingadmissionpolicybindings named {NAME} (deploy/scheduler.yaml does) or check with `kubectl get validatingadmissionpolicy,validatingadmissionpolicybinding {NAME}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt as _;

    #[test]
    fn no_runtime_pod_is_made_unless_the_policy_is_installed_and_denies() {
        assert_eq!(refusal(&Presence::Installed), None);
        let missing = refusal(&Presence::Missing {
            kind: "ValidatingAdmissionPolicyBinding",
        });
        assert!(missing.unwrap().starts_with(
            "not creating Runtime Pods: ValidatingAdmissionPolicyBinding kubectl-kruntimes-runtimed is not installed,"
        ));
        let unknown = refusal(&Presence::Unknown {
            error: "reading ValidatingAdmissionPolicy kubectl-kruntimes-runtimed failed: forbidden"
                .into(),
        });
        assert!(
            unknown
                .unwrap()
                .contains("failed: forbidden, and without it")
        );
    }

    #[test]
    fn only_the_shipped_rules_bound_to_deny_and_clean_of_type_warnings_count_as_installed() {
        let (policy, binding) = objects().unwrap();
        assert_eq!(judge(Some(&policy), Some(&binding)), Presence::Installed);
        // What the API server fills in (each rule's scope) changes nothing.
        let mut defaulted = policy.clone();
        let spec = defaulted.spec.as_mut().unwrap();
        for rule in spec
            .match_constraints
            .as_mut()
            .unwrap()
            .resource_rules
            .as_mut()
            .unwrap()
        {
            rule.scope.get_or_insert_with(|| "*".into());
        }
        assert_eq!(judge(Some(&defaulted), Some(&binding)), Presence::Installed);
        // Nor does kustomize's re-folding of multi-line expressions (blank lines added).
        let mut refolded = policy.clone();
        for v in refolded
            .spec
            .as_mut()
            .unwrap()
            .validations
            .as_mut()
            .unwrap()
        {
            v.expression = v.expression.replace('\n', "\n\n ");
        }
        assert_eq!(judge(Some(&refolded), Some(&binding)), Presence::Installed);

        assert_eq!(
            judge(None, Some(&binding)),
            Presence::Missing {
                kind: "ValidatingAdmissionPolicy"
            }
        );
        assert_eq!(
            judge(Some(&policy), None),
            Presence::Missing {
                kind: "ValidatingAdmissionPolicyBinding"
            }
        );
        let weakened =
            |p: &ValidatingAdmissionPolicy, b: &ValidatingAdmissionPolicyBinding| match judge(
                Some(p),
                Some(b),
            ) {
                Presence::Weakened { why } => why,
                other => panic!("expected Weakened, got {other:?}"),
            };
        let mut warn = binding.clone();
        warn.spec.validation_actions = vec!["Warn".into()];
        assert!(weakened(&policy, &warn).contains("which do not deny"));
        let mut narrowed = binding.clone();
        narrowed.spec.match_resources = Some(Default::default());
        assert!(weakened(&policy, &narrowed).contains("narrows what the policy matches"));
        let mut fewer = policy.clone();
        fewer
            .spec
            .as_mut()
            .unwrap()
            .validations
            .as_mut()
            .unwrap()
            .pop();
        assert!(weakened(&fewer, &binding).contains("is not the one this release ships"));
        // A policy narrowed to match nothing (or less) is not the shipped one; the server's own
        // defaults (empty selectors, Equivalent) are.
        let mut server_defaults = policy.clone();
        let constraints = server_defaults
            .spec
            .as_mut()
            .unwrap()
            .match_constraints
            .as_mut()
            .unwrap();
        constraints.namespace_selector = Some(Default::default());
        constraints.object_selector = Some(Default::default());
        constraints.match_policy = Some("Equivalent".into());
        assert_eq!(
            judge(Some(&server_defaults), Some(&binding)),
            Presence::Installed
        );
        let mut narrowed_policy = server_defaults.clone();
        narrowed_policy
            .spec
            .as_mut()
            .unwrap()
            .match_constraints
            .as_mut()
            .unwrap()
            .object_selector = Some(
            serde_json::from_value(serde_json::json!({"matchLabels": {"never": "x"}})).unwrap(),
        );
        assert!(weakened(&narrowed_policy, &binding).contains("is not the one this release ships"));
        let mut ignore = policy.clone();
        ignore.spec.as_mut().unwrap().failure_policy = Some("Ignore".into());
        assert!(weakened(&ignore, &binding).contains("is not the one this release ships"));
        let mut warned = policy.clone();
        warned.status = Some(
            serde_json::from_value(serde_json::json!({
                "typeChecking": {"expressionWarnings": [
                    {"fieldRef": "spec.validations[0].expression", "warning": "undefined field 'x'"}
                ]}
            }))
            .unwrap(),
        );
        let why = weakened(&warned, &binding);
        assert!(
            why.contains("type check") && why.contains("undefined field 'x'"),
            "{why}"
        );
        assert!(
            refusal(&Presence::Weakened { why })
                .unwrap()
                .starts_with("not creating Runtime Pods: the API server's type check")
        );
    }

    #[test]
    fn the_manifest_is_one_policy_and_its_binding_named_alike() {
        let (policy, binding) = objects().unwrap();
        assert_eq!(policy.name_any(), NAME);
        assert_eq!(binding.name_any(), NAME);
        assert_eq!(binding.spec.policy_name, NAME);
        assert_eq!(binding.spec.validation_actions, ["Deny"]);
        let spec = policy.spec.unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        assert!(spec.param_kind.is_none(), "the policy needs no parameters");
    }

    #[test]
    fn parsing_keeps_every_field_of_the_shipped_file() {
        // What install applies (the typed objects) is exactly what the file says.
        let raw = crate::util::yaml::documents(MANIFEST).unwrap();
        let (policy, binding) = objects().unwrap();
        let typed = vec![
            serde_json::to_value(policy).unwrap(),
            serde_json::to_value(binding).unwrap(),
        ];
        assert_eq!(typed, raw);
    }

    #[test]
    fn it_matches_the_runtimed_service_account_of_any_namespace_and_nothing_else() {
        let spec = objects().unwrap().0.spec.unwrap();
        let conditions = spec.match_conditions.unwrap();
        assert_eq!(conditions.len(), 1);
        let expr = &conditions[0].expression;
        assert!(
            expr.contains("startsWith('system:serviceaccount:')"),
            "{expr}"
        );
        for account in [
            "== 'kubectl-kruntimes-runtimed'",
            "startsWith('kubectl-kruntimes-runtimed-')",
        ] {
            assert!(expr.contains(account), "{account} in {expr}");
        }
    }

    #[test]
    fn the_warning_names_what_is_missing_and_the_fix() {
        let cluster = "context c (server https://s)";
        assert_eq!(warning(&Presence::Installed, cluster), None);
        let missing = warning(
            &Presence::Missing {
                kind: "ValidatingAdmissionPolicy",
            },
            cluster,
        )
        .unwrap();
        assert!(
            missing.starts_with(
                "Runtime Pods are not restricted: ValidatingAdmissionPolicy kubectl-kruntimes-runtimed is not installed in context c (server https://s)"
            ),
            "{missing}"
        );
        assert!(missing.ends_with("run `kubectl kruntimes install` to install it"));
        let unknown = warning(
            &Presence::Unknown {
                error:
                    "reading ValidatingAdmissionPolicy kubectl-kruntimes-runtimed failed: forbidden"
                        .into(),
            },
            cluster,
        )
        .unwrap();
        assert!(
            unknown.starts_with("cannot tell whether Runtime Pods are restricted in context c"),
            "{unknown}"
        );
        assert!(unknown.contains("deploy/scheduler.yaml"), "{unknown}");
    }
}
