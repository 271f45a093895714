//! What a Runtime Pod may do: the ValidatingAdmissionPolicy (and its binding) that restricts
//! the `kubectl-kruntimes-runtimed[-<runtime>]` service accounts to their own Pod's Runs and
//! heartbeat Lease, and the check that tells the scheduler whether it is installed and denies
//! (without it the Runtime controller creates no Runtime Pod: [`refusal`]).
//!
//! The policy itself is `deploy/runtimed-policy.yaml`, embedded here so that `install` applies
//! and prints exactly the shipped file. This module does not apply anything ([`crate::install`]
//! does); it only parses the manifest and reads whether the cluster has it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Client;
use kube::api::Api;
use serde::Deserialize as _;
use thiserror::Error;

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-runtimed";

/// `deploy/runtimed-policy.yaml`, as shipped.
pub const MANIFEST: &str = include_str!("../deploy/runtimed-policy.yaml");

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "the embedded deploy/runtimed-policy.yaml is not a ValidatingAdmissionPolicy followed by its binding: {0}; fix the file and rebuild"
    )]
    Manifest(String),
}

/// The policy and its binding, parsed from [`MANIFEST`].
pub fn objects() -> Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    let mut docs = crate::yaml::documents(MANIFEST)
        .map_err(Error::Manifest)?
        .into_iter();
    let policy = docs
        .next()
        .ok_or_else(|| Error::Manifest("it is empty".into()))
        .and_then(|d| {
            ValidatingAdmissionPolicy::deserialize(d)
                .map_err(|e| Error::Manifest(format!("first document: {e}")))
        })?;
    let binding = docs
        .next()
        .ok_or_else(|| Error::Manifest("the binding is missing".into()))
        .and_then(|d| {
            ValidatingAdmissionPolicyBinding::deserialize(d)
                .map_err(|e| Error::Manifest(format!("second document: {e}")))
        })?;
    if docs.next().is_some() {
        return Err(Error::Manifest("it has more than two documents".into()));
    }
    Ok((policy, binding))
}

/// Whether the cluster enforces the policy, as far as the caller may read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// The policy and a binding of the same name exist.
    Installed,
    /// `kind` (ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding) is missing.
    Missing { kind: &'static str },
    /// It could not be read (forbidden, unreachable, …).
    Unknown { error: String },
}

/// Reads the policy and its binding (two GETs).
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
    match policies.get_opt(NAME).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Presence::Missing {
                kind: "ValidatingAdmissionPolicy",
            };
        }
        Err(e) => return unknown("ValidatingAdmissionPolicy", e),
    }
    match bindings.get_opt(NAME).await {
        Ok(Some(binding)) => {
            let actions = binding.spec.validation_actions;
            let bound = binding.spec.policy_name;
            if bound != NAME {
                Presence::Unknown {
                    error: format!(
                        "ValidatingAdmissionPolicyBinding {NAME} binds policy {bound:?}, not {NAME}"
                    ),
                }
            } else if !actions.iter().any(|a| a == "Deny") {
                // Warn or Audit alone lets every refused write through.
                Presence::Unknown {
                    error: format!(
                        "ValidatingAdmissionPolicyBinding {NAME} has validationActions {actions:?}, which do not deny"
                    ),
                }
            } else {
                Presence::Installed
            }
        }
        Ok(None) => Presence::Missing {
            kind: "ValidatingAdmissionPolicyBinding",
        },
        Err(e) => unknown("ValidatingAdmissionPolicyBinding", e),
    }
}

/// Why the Runtime controller creates no Runtime Pod under `presence`, if it may not: a Pod's
/// token is only safe to hand out while the policy is installed and denies (fail closed: a
/// policy that cannot be read counts as missing). Said on the Runtime (`ReplicaFailure`).
pub fn refusal(presence: &Presence) -> Option<String> {
    let why = match presence {
        Presence::Installed => return None,
        Presence::Missing { kind } => format!("{kind} {NAME} is not installed"),
        Presence::Unknown { error } => error.clone(),
    };
    Some(format!(
        "not creating Runtime Pods: {why}, and without it a task could use its Pod's token to change other Runs' status; run `kubectl kruntimes install` (or apply deploy/runtimed-policy.yaml)"
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
        let raw = crate::yaml::documents(MANIFEST).unwrap();
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
