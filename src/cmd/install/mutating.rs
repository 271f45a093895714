//! Where the submitter's MutatingAdmissionPolicy can go. Kubernetes serves
//! `mutatingadmissionpolicies` at `admissionregistration.k8s.io/v1` from 1.36, at `v1beta1`
//! on 1.34 and 1.35 where a cluster enables it, and not at all on 1.32 and 1.33 as shipped
//! (alpha only); kruntimes installs on all of them. This module owns finding that version by
//! discovery ([`served`]), saying what is lost where there is none ([`left_out`]), and applying
//! and deleting the policy and its binding at the version found.
//!
//! It must not decide what the policy says: that is
//! `deploy/submitter-mutation/submitter-mutation.yaml`, parsed by
//! [`crate::policy::submitter`]. The two versions' schemas are the same for every field the
//! policy uses, so one object is applied at either.

use anyhow::anyhow;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use serde::Serialize;

use super::Applied;
use crate::api::{ANNOTATION_FAIR_SHARE_LABEL, ANNOTATION_SUBMITTED_BY};
use crate::kubeclient::Target;

const GROUP: &str = "admissionregistration.k8s.io";
const PLURAL: &str = "mutatingadmissionpolicies";

/// The versions tried, newest first: what discovery offers among them is the one applied.
pub const VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The version of `admissionregistration.k8s.io` that serves MutatingAdmissionPolicy (and its
/// binding), newest first, or `None` when the server serves neither.
pub async fn served(target: &Target) -> anyhow::Result<Option<&'static str>> {
    for version in VERSIONS {
        match target
            .client
            .list_api_group_resources(&format!("{GROUP}/{version}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == PLURAL) => {
                return Ok(Some(version));
            }
            // A version the server does not serve at all answers 404; any other error is not an
            // answer, and saying "not served" on it would leave the policy out (or in) unsaid.
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(
                    target.explain_error(e, "cannot read the admission APIs the server serves")
                );
            }
        }
    }
    Ok(None)
}

/// What install says where the server serves no MutatingAdmissionPolicy: which object is left
/// out, what fair sharing does without it, and what still holds.
pub fn left_out(target: &str, kubernetes: &str) -> String {
    format!(
        "{target} runs Kubernetes {kubernetes}, which serves no MutatingAdmissionPolicy (admissionregistration.k8s.io/v1 from 1.36, v1beta1 where 1.34 or 1.35 enables it): the mutating policy {name} is left out, so new Runs carry no {ANNOTATION_SUBMITTED_BY} and fair sharing groups them by the label a Runtime names in {ANNOTATION_FAIR_SHARE_LABEL}, or all in one group; the validating policy {name} still refuses a forged {ANNOTATION_SUBMITTED_BY}",
        name = crate::policy::submitter::NAME,
    )
}

fn resource(version: &str, kind: &str) -> ApiResource {
    let plural = match kind {
        "MutatingAdmissionPolicy" => PLURAL.to_string(),
        other => format!("{}s", other.to_lowercase()),
    };
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural,
    }
}

/// Server-side applies (or dry-runs) `object`, a MutatingAdmissionPolicy or its binding as
/// parsed at `v1`, at `version` (through [`super::system::apply_one`], as any object of a
/// kind found by discovery), and reports what changed as `kind.group/name`.
pub async fn apply<K: Serialize + kube::Resource<DynamicType = ()>>(
    target: &Target,
    version: &str,
    object: &K,
    dry_run: bool,
) -> anyhow::Result<(String, Applied)> {
    let kind = K::kind(&());
    let mut value =
        serde_json::to_value(object).map_err(|e| anyhow!("cannot render {kind} as JSON: {e}"))?;
    value["apiVersion"] = format!("{GROUP}/{version}").into();
    let object: DynamicObject = serde_json::from_value(value)
        .map_err(|e| anyhow!("cannot render {kind} as an object: {e}"))?;
    let applied = super::system::apply_one(target, &object, dry_run).await?;
    Ok((super::system::describe(&object), applied))
}

/// Deletes the object of `kind` named `name` at `version`; false when it was not there.
pub async fn delete(
    target: &Target,
    version: &str,
    kind: &str,
    name: &str,
) -> anyhow::Result<bool> {
    let api: Api<DynamicObject> = Api::all_with(target.client.clone(), &resource(version, kind));
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(target.explain_error(
            e,
            &format!("cannot delete {}.{GROUP}/{name}", kind.to_lowercase()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_and_the_policy_have_their_api_servers_plurals() {
        assert_eq!(
            resource("v1beta1", "MutatingAdmissionPolicy").plural,
            "mutatingadmissionpolicies"
        );
        let binding = resource("v1beta1", "MutatingAdmissionPolicyBinding");
        assert_eq!(binding.plural, "mutatingadmissionpolicybindings");
        assert_eq!(binding.api_version, "admissionregistration.k8s.io/v1beta1");
    }

    #[test]
    fn the_note_names_the_policy_what_fairness_does_instead_and_what_still_holds() {
        let note = left_out("cluster x", "v1.32.13");
        for part in [
            "v1.32.13",
            "kubectl-kruntimes-submitter",
            "kruntimes.io/fair-share-label",
            "all in one group",
            "still refuses",
        ] {
            assert!(note.contains(part), "{part}: {note}");
        }
    }
}
