use super::*;

#[test]
fn the_floor_is_kubernetes_1_32_whatever_a_managed_cluster_appends() {
    assert!(below_floor("1", "31"));
    assert!(below_floor("1", "31+"));
    assert!(!below_floor("1", "32"));
    assert!(!below_floor("1", "32+"));
    assert!(!below_floor("1", "36"));
    assert!(!below_floor("2", "0"));
    assert!(!below_floor("", ""), "an unreadable version is let through");
}

#[test]
fn the_crds_yaml_reads_back_as_exactly_the_crds() {
    // Long descriptions and CEL rules are folded in the YAML: reading it back must give
    // every string exactly, or `kubectl apply -k deploy/crds/` would install other rules.
    let read = crate::util::yaml::documents(&crds_yaml().unwrap()).unwrap();
    let built: Vec<serde_json::Value> = crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(read, built);
}

#[test]
fn parsing_the_user_roles_keeps_every_field_of_the_shipped_file() {
    let raw = crate::util::yaml::documents(USER_ROLES).unwrap();
    let typed: Vec<serde_json::Value> = user_roles()
        .unwrap()
        .into_iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert_eq!(typed, raw);
}

#[test]
fn user_roles_aggregate_into_the_built_in_roles_and_never_grant_status() {
    let roles = user_roles().unwrap();
    let label = |role: &ClusterRole, to: &str| {
        role.labels()
            .get(&format!("rbac.authorization.k8s.io/aggregate-to-{to}"))
            .map(String::as_str)
            == Some("true")
    };
    let view = roles
        .iter()
        .find(|r| r.name_any() == "kubectl-kruntimes-view")
        .unwrap();
    assert!(["view", "edit", "admin"].iter().all(|to| label(view, to)));
    let writes = |role: &ClusterRole| -> Vec<String> {
        role.rules
            .iter()
            .flatten()
            .filter(|r| r.verbs.iter().any(|v| v == "create"))
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect()
    };
    // Submitting Runs (and WorkflowRuns, which become Runs) and administering Runtimes
    // (Pod-create equivalent) are apart.
    for (name, resources) in [
        (
            "kubectl-kruntimes-submit",
            vec![
                "runs",
                "workflowruns",
                "workflows",
                "actions",
                "runs/invoke",
            ],
        ),
        (
            "kubectl-kruntimes-runtime-admin",
            vec!["runtimes", "persistentworkspaces"],
        ),
    ] {
        let role = roles.iter().find(|r| r.name_any() == name).unwrap();
        assert!(!label(role, "view"), "viewers must not write {resources:?}");
        assert!(["edit", "admin"].iter().all(|to| label(role, to)));
        assert_eq!(writes(role), resources, "{name}");
    }
    assert_eq!(roles.len(), 3, "view, submit, runtime-admin");
    // No status and no wildcard; the only subresources are runtimed's API (its log,
    // artifacts and invoke), which runtimed checks against them.
    for role in &roles {
        for rule in role.rules.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                assert!(
                    !resource.ends_with("/status") && !resource.contains('*'),
                    "{} grants {resource}",
                    role.name_any()
                );
                if resource.contains('/') {
                    assert!(
                        ["runs/log", "runs/artifacts", "runs/invoke"].contains(&resource.as_str()),
                        "{} grants {resource}",
                        role.name_any()
                    );
                }
            }
        }
    }
}
