//! What a Run's spec must be: the ValidatingAdmissionPolicy (and its binding) that holds the
//! rules the Run CRD held as `x-kubernetes-validations` (exactly one mode, relative entrypoint
//! and inline paths, source combinations, non-empty affinity selectors, the immutable inputs,
//! one-way cancel), with the same messages. It matches `runs` and never `runs/status`, so the
//! scheduler's and runtimed's status writes no longer pay for the spec's rules (the API server
//! evaluates a CRD's rules on every write of the object).
//!
//! The policy is `deploy/run-policy.yaml`, embedded so that `install` applies and prints
//! exactly the shipped file. This module only parses it (`install` applies it and
//! waits until it is enforced).

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-run";

/// `deploy/run-policy.yaml`, as shipped.
pub const MANIFEST: &str = include_str!("../../deploy/run-policy.yaml");

/// The policy and its binding, parsed from [`MANIFEST`], or why the embedded file is not them.
pub fn objects() -> Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding), String> {
    super::pair("deploy/run-policy.yaml", MANIFEST)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::{CustomResourceExt as _, ResourceExt as _};

    #[test]
    fn the_policy_matches_writes_of_runs_and_never_their_status() {
        let (policy, binding) = objects().unwrap();
        assert_eq!(
            (policy.name_any(), binding.name_any()),
            (NAME.into(), NAME.into())
        );
        let spec = policy.spec.unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["runs".to_string()][..])
        );
        let messages: Vec<String> = spec
            .validations
            .unwrap()
            .into_iter()
            .map(|v| v.message.unwrap_or_default())
            .collect();
        assert!(messages.contains(&"exactly one of task or function must be set".to_string()));
        assert!(
            messages.contains(&"cancelRequested may not transition from true to false".to_string())
        );
        assert_eq!(binding.spec.validation_actions, ["Deny"]);
    }

    #[test]
    fn the_run_crd_keeps_no_rule_that_status_writes_would_pay_for() {
        let crd = serde_json::to_string(&crate::api::Run::crd()).unwrap();
        assert!(
            !crd.contains("x-kubernetes-validations"),
            "the Run CRD has CEL rules again: move them to deploy/run-policy.yaml"
        );
    }
}
