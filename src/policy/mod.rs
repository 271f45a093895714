//! The ValidatingAdmissionPolicies (and the one MutatingAdmissionPolicy) kruntimes ships, one
//! module per policy, each named for what it guards: [`runtimed`] (what a Runtime Pod's token
//! may write), [`run`] (what a Run's spec must be) and [`submitter`] (who submitted each Run).
//! Each embeds its shipped manifest and parses it; none applies anything (`install`
//! does). The policy on the scheduler's own token (which Pods it may create, change and delete)
//! is part of `deploy/scheduler.yaml`, installed and removed with the scheduler it guards.

pub mod run;
pub mod runtimed;
pub mod submitter;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde::Deserialize as _;

/// A ValidatingAdmissionPolicy and its binding, parsed from `manifest` (the shipped file
/// `file`), or why the embedded file is not exactly those two documents.
pub fn pair(
    file: &str,
    manifest: &str,
) -> Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding), String> {
    let bad = |why: String| {
        format!(
            "the embedded {file} is not a ValidatingAdmissionPolicy and its binding: {why}; fix the file and rebuild"
        )
    };
    let docs = crate::util::yaml::documents(manifest).map_err(bad)?;
    let [policy, binding] = <[_; 2]>::try_from(docs)
        .map_err(|docs| bad(format!("it has {} documents, not 2", docs.len())))?;
    Ok((
        ValidatingAdmissionPolicy::deserialize(policy)
            .map_err(|e| bad(format!("document 1: {e}")))?,
        ValidatingAdmissionPolicyBinding::deserialize(binding)
            .map_err(|e| bad(format!("document 2: {e}")))?,
    ))
}
