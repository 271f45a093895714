//! What `install` finds before it writes: CRDs of the same names that another implementation
//! (the Go kruntimes project's Helm chart, say) manages, what applying ours changes in them, and
//! a foreign scheduler that holds its Lease.
//!
//! Owns the rule that install never makes a stored object undecodable: it refuses, changing
//! nothing, when the CRD in the cluster has stored versions ours does not serve, or fields ours
//! would prune. The comparison ([`compare`]) is pure; [`survey`] only reads.

use std::collections::BTreeSet;

use anyhow::anyhow;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::ResourceExt as _;
use kube::api::Api;
use serde_json::Value;

use crate::api::FIELD_MANAGER;
use crate::kubeclient::Target;
use crate::manager::foreign;

/// The fields of every object's root, which controller-gen declares and kube-derive does not.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Managers that write every object and say nothing about who installed it.
const NEUTRAL_MANAGERS: [&str; 2] = ["kube-apiserver", "kube-controller-manager"];

/// The one-line notices to print before install writes, or an error when applying ours would
/// break objects already stored.
pub async fn survey(target: &Target) -> anyhow::Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    let mut notices = Vec::new();
    for ours in super::crds() {
        let name = ours.name_any();
        let existing = api
            .get_opt(&name)
            .await
            .map_err(|e| target.explain_error(e, &format!("cannot read CRD {name}")))?;
        if let Some(existing) = existing {
            let comparison = compare(&existing, &ours)?;
            notices.extend(comparison.notices);
            if !comparison.schemaless.is_empty() {
                check_stored(target, &ours, &comparison.schemaless).await?;
            }
        }
    }
    match foreign::find(
        &target.client,
        &[foreign::FOREIGN_NAMESPACE.to_string()],
        jiff::Timestamp::now(),
    )
    .await
    {
        Ok(Some(leader)) => notices.push(format!(
            "{leader}: the kruntimes scheduler will wait as a standby, placing no Run, until it is released; scale the other scheduler down first (docs/operations/migrating-from-go.md)"
        )),
        Ok(None) => {}
        Err(e) => notices.push(format!(
            "cannot tell whether another kruntimes scheduler runs (reading its Leases: {e})"
        )),
    }
    Ok(notices)
}

/// What applying our CRD over one of the same name changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// One line each, for the user.
    pub notices: Vec<String>,
    /// Fields below which the installed CRD keeps anything (`x-kubernetes-preserve-unknown-
    /// fields`) and ours does not: whether applying ours prunes something there depends on what
    /// is stored, so the stored objects are looked at.
    pub schemaless: Vec<String>,
}

/// What applying `ours` over `existing` (a CRD of the same name) changes; an error when it
/// would make stored objects undecodable or prune fields the installed schema declares.
pub fn compare(
    existing: &CustomResourceDefinition,
    ours: &CustomResourceDefinition,
) -> anyhow::Result<Comparison> {
    let name = ours.name_any();
    let served: BTreeSet<&str> = ours.spec.versions.iter().map(|v| v.name.as_str()).collect();
    let stored: Vec<&String> = existing
        .status
        .iter()
        .flat_map(|s| s.stored_versions.iter().flatten())
        .filter(|v| !served.contains(v.as_str()))
        .collect();
    if !stored.is_empty() {
        return Err(anyhow!(
            "refusing to install: CRD {name} in the cluster has objects stored as {}, which kruntimes does not serve (it serves {}); nothing was changed",
            join(stored.iter().map(|s| s.as_str())),
            join(served.iter().copied())
        ));
    }
    let managers = foreign_managers(existing);
    if managers.is_empty() {
        return Ok(Comparison::default());
    }
    let mut schemaless = Vec::new();
    let mut notices = vec![format!(
        "CRD {name} is already installed and managed by {} (another kruntimes installation?); install replaces its schema with kruntimes' superset of the same v1alpha1 API: stored objects keep decoding and no field is pruned",
        join(managers.iter().map(String::as_str))
    )];
    for version in &ours.spec.versions {
        let Some(theirs) = existing
            .spec
            .versions
            .iter()
            .find(|v| v.name == version.name)
        else {
            continue;
        };
        let (before, after) = (
            schema_paths(&schema_of(theirs)),
            schema_paths(&schema_of(version)),
        );
        let (wildcards, pruned): (Vec<&str>, Vec<&str>) = before
            .iter()
            .filter(|p| !covered(p, &after))
            .map(String::as_str)
            .partition(|p| p.ends_with(".*"));
        schemaless.extend(
            wildcards
                .iter()
                .map(|p| p.trim_end_matches(".*").to_string()),
        );
        if !pruned.is_empty() {
            return Err(anyhow!(
                "refusing to install: kruntimes' {name} {} has no field {}, which the installed CRD declares, so stored values would be pruned; nothing was changed",
                version.name,
                join(pruned.iter().copied())
            ));
        }
        let added: Vec<&str> = after
            .iter()
            .filter(|p| !covered(p, &before))
            .map(String::as_str)
            .collect();
        if !added.is_empty() {
            notices.push(format!(
                "{name} {} gains the fields {}",
                version.name,
                join(added.iter().copied())
            ));
        }
    }
    Ok(Comparison {
        notices,
        schemaless,
    })
}

/// Refuses, naming the object and the field, when a stored object of `ours`' kind holds a
/// field below `schemaless` that our schema would prune.
async fn check_stored(
    target: &Target,
    ours: &CustomResourceDefinition,
    schemaless: &[String],
) -> anyhow::Result<()> {
    let name = ours.name_any();
    let Some(version) = ours.spec.versions.first() else {
        return Ok(());
    };
    let resource = kube::discovery::ApiResource {
        group: ours.spec.group.clone(),
        version: version.name.clone(),
        api_version: format!("{}/{}", ours.spec.group, version.name),
        kind: ours.spec.names.kind.clone(),
        plural: ours.spec.names.plural.clone(),
    };
    let declared = schema_paths(&schema_of(version));
    let objects = Api::<kube::api::DynamicObject>::all_with(target.client.clone(), &resource)
        .list(&Default::default())
        .await
        .map_err(|e| {
            target.explain_error(e, &format!("cannot list the stored {}", resource.plural))
        })?;
    for object in objects.items {
        let stored = serde_json::to_value(&object.data).unwrap_or(Value::Null);
        let mut fields = std::collections::BTreeSet::new();
        value_paths(&stored, "", &mut fields);
        let pruned = fields.iter().find(|f| {
            schemaless
                .iter()
                .any(|s| f.starts_with(&format!("{s}.")) || *f == s)
                && !covered(f, &declared)
        });
        if let Some(field) = pruned {
            return Err(anyhow!(
                "refusing to install: {} {}/{} stored under the installed CRD {name} has the field {field}, which kruntimes' schema does not declare and would prune; nothing was changed",
                resource.kind,
                object.namespace().unwrap_or_default(),
                object.name_any()
            ));
        }
    }
    Ok(())
}

/// The structural schema of one version of a CRD, as JSON (`null` without one).
fn schema_of(version: &CustomResourceDefinitionVersion) -> Value {
    version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

/// The path of every leaf value of `value` (`status.outputs.loss`, `spec.env[].name`).
fn value_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (field, sub) in fields {
                let next = if path.is_empty() {
                    field.clone()
                } else {
                    format!("{path}.{field}")
                };
                value_paths(sub, &next, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                value_paths(item, &format!("{path}[]"), out);
            }
        }
        _ if !path.is_empty() => {
            out.insert(path.to_string());
        }
        _ => {}
    }
}

/// The managers of `crd` other than kruntimes and the control plane's own.
fn foreign_managers(crd: &CustomResourceDefinition) -> Vec<String> {
    // Ours, whichever tool applied it (`install`, `kubectl apply -k deploy/`, a chart).
    let (key, value) = super::LABEL_OURS;
    if crd.labels().get(key).map(String::as_str) == Some(value) {
        return Vec::new();
    }
    let mut managers: Vec<String> = crd
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .filter(|m| m != FIELD_MANAGER && !NEUTRAL_MANAGERS.contains(&m.as_str()))
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// Every field path a structural schema declares (`spec.mode.task.args[]`), with `*` for the
/// values of a map and a trailing `.*` below a node that preserves unknown fields.
pub fn schema_paths(schema: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(schema, "", &mut out);
    out
}

fn walk(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    // Every object has these, declared in its schema or not; the API server never prunes them.
    if ROOT_FIELDS.contains(&path) {
        return;
    }
    if !path.is_empty() {
        out.insert(path.to_string());
    }
    let join = |field: &str| {
        if path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        }
    };
    if schema["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true) {
        out.insert(join("*"));
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (field, sub) in properties {
            walk(sub, &join(field), out);
        }
    }
    if schema["items"].is_object() {
        walk(&schema["items"], &format!("{path}[]"), out);
    }
    if schema["additionalProperties"].is_object() {
        walk(&schema["additionalProperties"], &join("*"), out);
    }
}

/// Whether `paths` keeps the field at `path`: it declares it, or preserves everything below
/// one of its ancestors.
fn covered(path: &str, paths: &BTreeSet<String>) -> bool {
    if paths.contains(path) {
        return true;
    }
    let mut prefix = path;
    while let Some(cut) = prefix.rfind(['.', '[']) {
        prefix = &prefix[..cut];
        if paths.contains(&format!("{prefix}.*")) {
            return true;
        }
    }
    false
}

fn join<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::CustomResourceExt as _;

    /// The root properties of the CRD's first version's schema.
    fn root(
        crd: &mut CustomResourceDefinition,
    ) -> &mut std::collections::BTreeMap<
        String,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
    > {
        crd.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema
            .as_mut()
            .unwrap()
            .properties
            .as_mut()
            .unwrap()
    }

    fn managed_by(mut crd: CustomResourceDefinition, manager: &str) -> CustomResourceDefinition {
        crd.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(manager.into()),
            ..Default::default()
        }]);
        crd
    }

    #[test]
    fn our_own_crd_needs_no_notice() {
        let ours = crate::api::Run::crd();
        let existing = managed_by(ours.clone(), FIELD_MANAGER);
        assert_eq!(compare(&existing, &ours).unwrap(), Comparison::default());
    }

    #[test]
    fn our_crd_applied_by_another_tool_is_ours() {
        let ours = super::super::crds()[1].clone();
        let applied = managed_by(ours.clone(), "kubectl-client-side-apply");
        assert_eq!(compare(&applied, &ours).unwrap(), Comparison::default());
        // The same CRD without our label, applied by that tool: someone else's.
        let mut theirs = applied;
        theirs.metadata.labels = None;
        assert!(!compare(&theirs, &ours).unwrap().notices.is_empty());
    }

    #[test]
    fn a_foreign_crd_is_named_with_its_manager_and_the_fields_ours_adds() {
        let ours = crate::api::Run::crd();
        let mut theirs = managed_by(ours.clone(), "helm");
        let status = root(&mut theirs).get_mut("status").unwrap();
        status.properties.as_mut().unwrap().remove("exitCode");
        let notices = compare(&theirs, &ours).unwrap().notices;
        assert!(notices[0].contains("managed by helm"), "{notices:?}");
        assert!(notices[1].contains("status.exitCode"), "{notices:?}");
    }

    #[test]
    fn a_field_ours_would_prune_or_a_version_ours_does_not_serve_refuses() {
        let ours = crate::api::Run::crd();
        let mut theirs = managed_by(ours.clone(), "helm");
        let spec = root(&mut theirs).get_mut("spec").unwrap();
        spec.properties
            .as_mut()
            .unwrap()
            .insert("suspend".into(), Default::default());
        let err = compare(&theirs, &ours).unwrap_err().to_string();
        assert!(err.contains("no field spec.suspend"), "{err}");
        assert!(err.contains("nothing was changed"), "{err}");

        let mut stored = managed_by(ours.clone(), "helm");
        stored.status = Some(Default::default());
        stored.status.as_mut().unwrap().stored_versions = Some(vec!["v1beta1".into()]);
        let err = compare(&stored, &ours).unwrap_err().to_string();
        assert!(err.contains("stored as v1beta1"), "{err}");
    }

    #[test]
    fn a_schemaless_installed_crd_asks_for_a_look_at_what_is_stored() {
        let ours = crate::api::Run::crd();
        let mut theirs = managed_by(ours.clone(), "helm");
        let schema = theirs.spec.versions[0].schema.as_mut().unwrap();
        schema.open_api_v3_schema = Some(
            serde_json::from_value(serde_json::json!({
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }))
            .unwrap(),
        );
        let comparison = compare(&theirs, &ours).unwrap();
        assert_eq!(comparison.schemaless, ["spec"]);
        let mut stored = BTreeSet::new();
        value_paths(
            &serde_json::json!({"spec": {"runtime": "a", "env": [{"name": "A"}], "suspend": true}}),
            "",
            &mut stored,
        );
        let declared = schema_paths(
            &serde_json::to_value(
                ours.spec.versions[0]
                    .schema
                    .as_ref()
                    .unwrap()
                    .open_api_v3_schema
                    .as_ref()
                    .unwrap(),
            )
            .unwrap(),
        );
        let pruned: Vec<&String> = stored.iter().filter(|p| !covered(p, &declared)).collect();
        assert_eq!(pruned, ["spec.suspend"]);
    }

    #[test]
    fn root_fields_an_installed_schema_declares_are_never_counted_as_pruned() {
        // controller-gen (the Go project's CRDs) declares apiVersion, kind and metadata at the
        // root; kube-derive does not. Neither is ever pruned.
        let ours = crate::api::Run::crd();
        let mut theirs = managed_by(ours.clone(), "helm");
        for field in ROOT_FIELDS {
            root(&mut theirs).insert(field.into(), Default::default());
        }
        let comparison = compare(&theirs, &ours).unwrap();
        assert_eq!(comparison.notices.len(), 1, "{comparison:?}");
        assert!(comparison.schemaless.is_empty());
    }

    #[test]
    fn fields_below_a_node_that_preserves_unknown_fields_are_kept() {
        let paths = schema_paths(&serde_json::json!({
            "properties": {"spec": {"properties": {"template": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true
            }}}}
        }));
        assert!(covered("spec.template.spec.containers[].name", &paths));
        assert!(!covered("spec.other", &paths));
    }
}
