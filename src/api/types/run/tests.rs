use super::*;
use kube::CustomResourceExt;

fn spec_schema(crd: serde_json::Value) -> serde_json::Value {
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

#[test]
fn spec_timeout_reads_go_durations_and_names_the_field_when_it_cannot() {
    let with = |t: &str| crate::testing::run("t").timeout(t).build().timeout();
    assert_eq!(with("3s"), Ok(Some(std::time::Duration::from_secs(3))));
    assert_eq!(
        with("1h30m"),
        Ok(Some(std::time::Duration::from_secs(5400)))
    );
    assert_eq!(
        with("500ms"),
        Ok(Some(std::time::Duration::from_millis(500)))
    );
    assert_eq!(crate::testing::run("t").build().timeout(), Ok(None));
    for bad in ["soon", "-5s", "0s"] {
        let err = with(bad).unwrap_err();
        assert!(
            err.starts_with(&format!("spec.timeout: {bad:?} is not a duration")),
            "{err}"
        );
    }
}

#[test]
fn run_crd_declares_selectable_fields_for_runtime_assigned_pod_and_phase() {
    let crd = serde_json::to_value(Run::crd()).unwrap();
    let fields = &crd["spec"]["versions"][0]["selectableFields"];
    assert_eq!(
        fields,
        &serde_json::json!([
            {"jsonPath": ".spec.runtime"},
            {"jsonPath": ".status.assignedPod"},
            {"jsonPath": ".status.phase"},
        ])
    );
}

#[test]
fn run_crd_keeps_its_schema_and_leaves_the_rules_to_the_run_policy() {
    let spec = spec_schema(serde_json::to_value(Run::crd()).unwrap());
    assert!(spec.get("x-kubernetes-validations").is_none(), "{spec}");
    assert_eq!(spec["required"], serde_json::json!(["runtime"]));
    assert_eq!(
        spec["properties"]["mode"]["default"],
        serde_json::json!({"task": {}})
    );
    let (policy, _) = crate::policy::run::objects().unwrap();
    let validations = policy.spec.unwrap().validations.unwrap();
    let expressions: Vec<&str> = validations.iter().map(|v| v.expression.as_str()).collect();
    assert!(
        expressions.iter().any(|r| r
            .contains("variables.spec.resources == variables.old.resources")
            && r.contains("variables.spec.mode == variables.old.mode")),
        "{expressions:?}"
    );
    assert!(
        expressions
            .iter()
            .any(|r| r.contains("variables.old.?cancelRequested"))
    );
    // kruntimes' own immutable fields share one rule, whose messageExpression names the
    // field.
    let ours: Vec<_> = validations
        .iter()
        .filter(|v| v.expression.contains("variables.old.priorityClassName"))
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(ours[0].expression.contains("variables.old.workspace"));
    assert!(ours[0].message_expression.is_some());
}

#[test]
fn upstream_field_names_round_trip() {
    let json = serde_json::json!({
        "runtime": "python",
        "mode": {"task": {"entrypoint": "main.py", "args": ["-v"]}},
        "env": [{"name": "A", "value": "1"}],
        "affinity": {"runAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kruntimes.io/runtime-pod"}
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "runAffinityTerm": {"labelSelector": {"matchLabels": {"c": "d"}}, "topologyKey": "kruntimes.io/runtime-pod"}}
            ]
        }},
        "source": {"repoURL": "https://example.com/r.git", "commitSHA": "abc"},
        "workspace": {"name": "ws"},
        "timeout": "10m",
        "cancelRequested": true,
        "retryPolicy": {"maxAttempts": 3, "backoff": "1s"},
        "ttlSecondsAfterFinished": 60
    });
    let spec: RunSpec = serde_json::from_value(json.clone()).unwrap();
    let terms = spec
        .affinity
        .as_ref()
        .unwrap()
        .run_affinity
        .as_ref()
        .unwrap();
    assert_eq!(terms.required.len(), 1);
    assert_eq!(terms.preferred[0].weight, 5);
    assert_eq!(serde_json::to_value(&spec).unwrap(), json);
}

#[test]
fn run_without_status_is_pending_and_inactive() {
    let run = crate::testing::run("a").build();
    assert!(run.status.is_none());
    assert_eq!(run.phase(), RunPhase::Pending);
    assert_eq!(run.active_pod(), None);
}

#[test]
fn a_ready_function_run_is_active_and_the_three_end_phases_are_terminal() {
    let mut run = crate::testing::run("a").on("p1").build();
    run.status.as_mut().unwrap().phase = Some(RunPhase::Ready);
    assert_eq!(run.active_pod(), Some("p1"));
    for phase in [RunPhase::Timeout, RunPhase::Cancelled, RunPhase::Succeeded] {
        run.status.as_mut().unwrap().phase = Some(phase);
        assert!(phase.is_terminal());
        assert_eq!(run.active_pod(), None);
    }
}
