//! Who submitted a Run: the MutatingAdmissionPolicy (and its binding) that writes the creating
//! identity into the annotation [`crate::api::ANNOTATION_SUBMITTED_BY`] and keeps it as
//! written, which the scheduler's fairness groups read, and the ValidatingAdmissionPolicy (and
//! its binding) that refuses any other value while the mutation cannot run.
//!
//! The validating policy is `deploy/submitter-policy.yaml` (GA on every Kubernetes kruntimes
//! supports), the mutating one `deploy/submitter-mutation/submitter-mutation.yaml` (Kubernetes
//! 1.36, or 1.34 and 1.35 where enabled: apart, so that `kubectl apply -k deploy/` works on
//! 1.32), both embedded so that `install` applies and prints exactly the shipped files. This
//! module only parses them (`install` applies them, at the version the server serves).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use serde::Deserialize as _;

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-submitter";

/// `deploy/submitter-policy.yaml`, as shipped: the ValidatingAdmissionPolicy and its binding.
pub const MANIFEST: &str = include_str!("../../deploy/submitter-policy.yaml");

/// `deploy/submitter-mutation/submitter-mutation.yaml`, as shipped: the
/// MutatingAdmissionPolicy and its binding.
pub const MUTATION_MANIFEST: &str =
    include_str!("../../deploy/submitter-mutation/submitter-mutation.yaml");

/// The policies and their bindings, parsed from [`MUTATION_MANIFEST`] and [`MANIFEST`].
#[derive(Debug, Clone)]
pub struct Objects {
    pub mutating: MutatingAdmissionPolicy,
    pub mutating_binding: MutatingAdmissionPolicyBinding,
    pub validating: ValidatingAdmissionPolicy,
    pub validating_binding: ValidatingAdmissionPolicyBinding,
}

/// [`Objects`] from [`MUTATION_MANIFEST`] and [`MANIFEST`], or why an embedded file is not them.
pub fn objects() -> Result<Objects, String> {
    let [m, mb] = pair(
        "deploy/submitter-mutation/submitter-mutation.yaml",
        MUTATION_MANIFEST,
        "a MutatingAdmissionPolicy",
    )?;
    let [v, vb] = pair(
        "deploy/submitter-policy.yaml",
        MANIFEST,
        "a ValidatingAdmissionPolicy",
    )?;
    let bad = |file: &str, n: usize, e: serde_json::Error| {
        format!("document {n} of the embedded {file}: {e}; fix the file and rebuild")
    };
    let mutation = "deploy/submitter-mutation/submitter-mutation.yaml";
    let validation = "deploy/submitter-policy.yaml";
    Ok(Objects {
        mutating: MutatingAdmissionPolicy::deserialize(m).map_err(|e| bad(mutation, 1, e))?,
        mutating_binding: MutatingAdmissionPolicyBinding::deserialize(mb)
            .map_err(|e| bad(mutation, 2, e))?,
        validating: ValidatingAdmissionPolicy::deserialize(v).map_err(|e| bad(validation, 1, e))?,
        validating_binding: ValidatingAdmissionPolicyBinding::deserialize(vb)
            .map_err(|e| bad(validation, 2, e))?,
    })
}

/// The two documents of the embedded `file` (`what` and its binding).
fn pair(file: &str, text: &str, what: &str) -> Result<[serde_json::Value; 2], String> {
    let bad = |why: String| {
        format!(
            "the embedded {file} is not {what} and its binding: {why}; fix the file and rebuild"
        )
    };
    let docs = crate::util::yaml::documents(text).map_err(bad)?;
    <[_; 2]>::try_from(docs).map_err(|docs| bad(format!("it has {} documents, not 2", docs.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt as _;

    #[test]
    fn the_manifest_is_both_policies_and_their_bindings_named_alike() {
        let o = objects().unwrap();
        for name in [
            o.mutating.name_any(),
            o.mutating_binding.name_any(),
            o.validating.name_any(),
            o.validating_binding.name_any(),
        ] {
            assert_eq!(name, NAME);
        }
        assert_eq!(
            o.mutating_binding.spec.unwrap().policy_name.as_deref(),
            Some(NAME)
        );
        assert_eq!(o.validating_binding.spec.validation_actions, ["Deny"]);
        // The mutation fails open (it cannot run before the API server has the schema); the
        // validation does not.
        assert_eq!(
            o.validating.spec.unwrap().failure_policy.as_deref(),
            Some("Fail")
        );
        let spec = o.mutating.spec.unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Ignore"));
        let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["runs".to_string(), "workflowruns".to_string()][..]),
            "Runs and WorkflowRuns, never their status"
        );
    }
}
