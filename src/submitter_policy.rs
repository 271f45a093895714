//! Who submitted a Run: the MutatingAdmissionPolicy (and its binding) that writes the creating
//! identity into the annotation [`crate::api::ANNOTATION_SUBMITTED_BY`] and keeps it as
//! written, which the scheduler's fairness groups read, and the ValidatingAdmissionPolicy (and
//! its binding) that refuses any other value while the mutation cannot run.
//!
//! The policy is `deploy/submitter-policy.yaml`, embedded so that `install` applies and
//! prints exactly the shipped file. This module only parses it ([`crate::install`] applies).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use serde::Deserialize as _;

/// Name of the policy and of its binding.
pub const NAME: &str = "kubectl-kruntimes-submitter";

/// `deploy/submitter-policy.yaml`, as shipped.
pub const MANIFEST: &str = include_str!("../deploy/submitter-policy.yaml");

/// The policies and their bindings, parsed from [`MANIFEST`].
#[derive(Debug, Clone)]
pub struct Objects {
    pub mutating: MutatingAdmissionPolicy,
    pub mutating_binding: MutatingAdmissionPolicyBinding,
    pub validating: ValidatingAdmissionPolicy,
    pub validating_binding: ValidatingAdmissionPolicyBinding,
}

/// [`Objects`] from [`MANIFEST`], or why the embedded file is not them.
pub fn objects() -> Result<Objects, String> {
    let bad = |why: String| {
        format!(
            "the embedded deploy/submitter-policy.yaml is not a MutatingAdmissionPolicy, a ValidatingAdmissionPolicy and their bindings: {why}; fix the file and rebuild"
        )
    };
    let docs = crate::yaml::documents(MANIFEST).map_err(bad)?;
    let [m, mb, v, vb] = <[_; 4]>::try_from(docs)
        .map_err(|docs| bad(format!("it has {} documents, not 4", docs.len())))?;
    let doc = |n: usize, e: serde_json::Error| bad(format!("document {n}: {e}"));
    Ok(Objects {
        mutating: MutatingAdmissionPolicy::deserialize(m).map_err(|e| doc(1, e))?,
        mutating_binding: MutatingAdmissionPolicyBinding::deserialize(mb).map_err(|e| doc(2, e))?,
        validating: ValidatingAdmissionPolicy::deserialize(v).map_err(|e| doc(3, e))?,
        validating_binding: ValidatingAdmissionPolicyBinding::deserialize(vb)
            .map_err(|e| doc(4, e))?,
    })
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
            Some(&["runs".to_string()][..]),
            "never runs/status"
        );
    }
}
