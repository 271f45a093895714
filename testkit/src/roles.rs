//! The one step of kube-controller-manager that RBAC tests need: ClusterRole aggregation.
//!
//! The test control plane has no kube-controller-manager, so the built-in `view`, `edit` and
//! `admin` roles keep no rules. [`aggregate_cluster_roles`] does what its
//! clusterrole-aggregation controller does (pkg/controller/clusterroleaggregation in
//! kubernetes v1.36): for every ClusterRole with an `aggregationRule`, the rules of the
//! ClusterRoles its selectors match (chosen by the API server's own label selection), in name
//! order, without duplicates. Authorization then stays entirely the API server's.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;

/// One aggregation at a time in this process: two tests aggregating at once would each
/// write the rules they computed from their own earlier list, and undo each other.
static AGGREGATING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Aggregates every aggregated ClusterRole until nothing changes (`view` feeds `edit`, which
/// feeds `admin`).
///
/// Like the controller, it writes each role only if it is unchanged since it was read (the
/// patch carries its `resourceVersion`), so a role that changed meanwhile is read again in the
/// next round instead of being overwritten with stale rules.
pub async fn aggregate_cluster_roles(client: &Client) {
    let _one_at_a_time = AGGREGATING.lock().await;
    let api: Api<ClusterRole> = Api::all(client.clone());
    // view -> edit -> admin is the longest chain; one more round proves it settled.
    for _ in 0..5 {
        let mut changed = false;
        let roles = api.list(&ListParams::default()).await.unwrap().items;
        for role in roles {
            let Some(rule) = &role.aggregation_rule else {
                continue;
            };
            let mut rules: Vec<PolicyRule> = Vec::new();
            for selector in rule.cluster_role_selectors.iter().flatten() {
                let mut matched = api
                    .list(&ListParams::default().labels(&selector_string(selector)))
                    .await
                    .unwrap()
                    .items;
                matched.sort_by_key(|r| r.name_any());
                for other in matched.iter().filter(|r| r.name_any() != role.name_any()) {
                    for r in other.rules.iter().flatten() {
                        if !rules.contains(r) {
                            rules.push(r.clone());
                        }
                    }
                }
            }
            if role.rules.clone().unwrap_or_default() != rules {
                changed = true;
                let patch = json!({
                    "metadata": {"resourceVersion": role.resource_version()},
                    "rules": rules,
                });
                match api
                    .patch(
                        &role.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                {
                    Ok(_) => {}
                    // Changed since the list: the next round reads it again.
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => panic!("aggregate ClusterRole {}: {e}", role.name_any()),
                }
            }
        }
        if !changed {
            return;
        }
    }
    panic!("ClusterRole aggregation did not settle");
}

/// `matchLabels` as a label selector string (the built-in aggregation rules use only those).
fn selector_string(selector: &LabelSelector) -> String {
    assert!(
        selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty),
        "aggregation selectors with matchExpressions are not supported here: {selector:?}"
    );
    let labels: BTreeMap<&String, &String> = selector.match_labels.iter().flatten().collect();
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
