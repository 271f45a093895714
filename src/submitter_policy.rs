//! Who submitted a Run: the MutatingAdmissionPolicy (and its binding) that writes the creating
//! identity into the annotation [`crate::api::ANNOTATION_SUBMITTED_BY`] and keeps it as
//! written, which the scheduler's fairness groups read.
//!
//! The policy is `deploy/submitter-policy.yaml`, embedded so that `install` applies and
//! prints exactly the shipped file. This module only parses it ([`crate::install`] applies).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use serde::Deserialize as _;

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-submitter";

/// `deploy/submitter-policy.yaml`, as shipped.
pub const MANIFEST: &str = include_str!("../deploy/submitter-policy.yaml");

/// The policy and its binding, parsed from [`MANIFEST`].
pub fn objects() -> Result<(MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding), String> {
    let bad = |why: String| {
        format!(
            "the embedded deploy/submitter-policy.yaml is not a MutatingAdmissionPolicy followed by its binding: {why}; fix the file and rebuild"
        )
    };
    let docs = crate::yaml::documents(MANIFEST).map_err(bad)?;
    let [policy, binding] = <[_; 2]>::try_from(docs)
        .map_err(|docs| bad(format!("it has {} documents, not 2", docs.len())))?;
    let policy = MutatingAdmissionPolicy::deserialize(policy)
        .map_err(|e| bad(format!("first document: {e}")))?;
    let binding = MutatingAdmissionPolicyBinding::deserialize(binding)
        .map_err(|e| bad(format!("second document: {e}")))?;
    Ok((policy, binding))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt as _;

    #[test]
    fn the_manifest_is_one_policy_and_its_binding_named_alike() {
        let (policy, binding) = objects().unwrap();
        assert_eq!(policy.name_any(), NAME);
        assert_eq!(binding.name_any(), NAME);
        assert_eq!(binding.spec.unwrap().policy_name.as_deref(), Some(NAME));
        let spec = policy.spec.unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["runs".to_string()][..]),
            "never runs/status"
        );
    }
}
