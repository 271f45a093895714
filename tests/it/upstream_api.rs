//! The upstream project's documented API against our CRDs on the real control plane: every
//! field and form that the Run, Runtime, PersistentWorkspace (and, in `upstream_api/workflows.rs`,
//! Workflow, WorkflowRun and Action) manifests of
//! github.com/kruntimes/kruntimes's docs show (commit cad3923), written as our own manifests in
//! `tests/fixtures/upstream-api/`, is accepted by `kubectl apply --server-side
//! --validate=strict` and stored without pruning; and the CEL rules upstream's API declares
//! (exactly one execution mode, one-way cancellation) refuse what they should.
//!
//! The fixtures' header comments list where a doc example's literal shape is one that
//! upstream's own API refuses (for example a Run without `spec.mode`), and which shape stands
//! for it here.

use testkit as support;

mod workflows;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::world::TestNs;

/// The field manager of every apply here.
const FIELD_MANAGER: &str = "upstream-docs";

/// Runs `cmd` to completion: its output, stdout and stderr.
fn output(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// `kubectl apply --server-side --validate=strict` of `source` (a path, or `-` with `stdin`).
fn apply(ns: &str, source: &str, stdin: Option<&str>) -> (Output, String, String) {
    let mut cmd = support::kubectl();
    cmd.args([
        "apply",
        "--server-side",
        "--validate=strict",
        &format!("--field-manager={FIELD_MANAGER}"),
        "-n",
        ns,
        "-f",
        source,
    ]);
    let Some(input) = stdin else {
        return output(&mut cmd);
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .expect("write the manifest to kubectl");
    let out = child.wait_with_output().expect("wait for kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn fixture_path(file: &str) -> String {
    format!(
        "{}/tests/fixtures/upstream-api/{file}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The manifests of a multi-document YAML fixture, as JSON.
fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    kruntimes::util::yaml::documents(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// The plural resource of a kruntimes kind, fully qualified.
fn resource(kind: &str) -> &'static str {
    match kind {
        "Run" => "runs.kruntimes.io",
        "Runtime" => "runtimes.kruntimes.io",
        "PersistentWorkspace" => "persistentworkspaces.kruntimes.io",
        "Workflow" => "workflows.kruntimes.io",
        "WorkflowRun" => "workflowruns.kruntimes.io",
        "Action" => "actions.kruntimes.io",
        other => panic!("not a kruntimes kind: {other}"),
    }
}

/// The stored object `name` of `kind`, as `kubectl get -o json` shows it (managed fields
/// included: kubectl leaves them out by default).
fn get(ns: &str, kind: &str, name: &str) -> Value {
    let target = format!("{}/{name}", resource(kind));
    let get = [
        "get",
        &target,
        "-n",
        ns,
        "-o",
        "json",
        "--show-managed-fields",
    ];
    let (out, stdout, stderr) = output(support::kubectl().args(get));
    assert!(out.status.success(), "kubectl get {target}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("kubectl get {target}: {e}"))
}

/// Where `actual` does not contain `expected`: a key missing or a value changed (at the path
/// given). Objects may have more keys (defaults); lists must be the same length, item by item.
fn differences(expected: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, want) in want {
                let at = format!("{path}.{key}");
                match have.get(key) {
                    Some(have) => differences(want, have, &at, out),
                    None => out.push(format!("{at}: pruned (was {want})")),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            for (i, (want, have)) in want.iter().zip(have).enumerate() {
                differences(want, have, &format!("{path}[{i}]"), out);
            }
        }
        (want, have) if want == have => {}
        (want, have) => out.push(format!("{path}: {want} was stored as {have}")),
    }
}

/// Every field path of `value` (`a.b`, lists as `a[].b`), map keys included.
fn field_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(path.clone());
                field_paths(value, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                field_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// A form of a manifest that at least one fixture must show.
type Form = (&'static str, fn(&Value) -> bool);

/// Checks that `file` holds manifests of `kind` only, that together they use every field path
/// in `fields` and every form in `forms` (so the fixture cannot quietly lose one), then
/// server-side applies it with strict field validation and checks that every object's spec
/// was stored as written (defaults may be added, nothing removed or changed).
async fn accepted_and_stored_unpruned(file: &str, kind: &str, fields: &[&str], forms: &[Form]) {
    let path = fixture_path(file);
    let docs = documents(&path);
    assert!(
        docs.len() >= 3,
        "{file} holds only {} manifests",
        docs.len()
    );
    let mut used = BTreeSet::new();
    for doc in &docs {
        assert_eq!(doc["apiVersion"], "kruntimes.io/v1alpha1", "{doc}");
        assert_eq!(doc["kind"], kind, "{file} holds another kind: {doc}");
        assert!(
            doc["spec"].is_object(),
            "{file}: a manifest without a spec: {doc}"
        );
        field_paths(&doc["spec"], "", &mut used);
    }
    let unused: Vec<&&str> = fields.iter().filter(|f| !used.contains(**f)).collect();
    assert!(unused.is_empty(), "{file} uses no spec field {unused:?}");
    let unshown: Vec<&str> = forms
        .iter()
        .filter(|(_, shows)| !docs.iter().any(|doc| shows(&doc["spec"])))
        .map(|(form, _)| *form)
        .collect();
    assert!(unshown.is_empty(), "{file} shows no {unshown:?}");

    let ns = TestNs::new(&format!("upstream-{}", kind.to_lowercase())).await;
    let (out, stdout, stderr) = apply(&ns.name, &path, None);
    assert!(
        out.status.success(),
        "kubectl apply --server-side --validate=strict {file} was refused:\n{stderr}\n{stdout}"
    );

    let mut failures = Vec::new();
    for doc in &docs {
        let name = doc["metadata"]["name"].as_str().expect("a named manifest");
        let stored = get(&ns.name, kind, name);
        differences(
            &doc["spec"],
            &stored["spec"],
            &format!("{name}: spec"),
            &mut failures,
        );
        let applied = stored["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|fields| {
                fields
                    .iter()
                    .any(|f| f["manager"] == FIELD_MANAGER && f["operation"] == "Apply")
            });
        if !applied {
            failures.push(format!(
                "{name}: no server-side Apply by {FIELD_MANAGER} in {}",
                stored["metadata"]["managedFields"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: stored objects differ from the manifests:\n{}",
        failures.join("\n")
    );
}

fn has(spec: &Value, pointer: &str) -> bool {
    spec.pointer(pointer).is_some()
}

#[testkit::test]
async fn every_documented_run_form_is_accepted_strictly_and_stored_unpruned() {
    const AFFINITY_TERM: [&str; 2] = ["labelSelector", "topologyKey"];
    let mut affinity = Vec::new();
    for kind in ["runAffinity", "runAntiAffinity"] {
        let required = format!("affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[]");
        let preferred =
            format!("affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[]");
        for field in AFFINITY_TERM {
            affinity.push(format!("{required}.{field}"));
            affinity.push(format!("{preferred}.runAffinityTerm.{field}"));
        }
        affinity.push(format!("{preferred}.weight"));
    }
    affinity.push(
        "affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[].labelSelector.matchLabels"
            .into(),
    );
    affinity.push(
        "affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[].labelSelector.matchExpressions"
            .into(),
    );
    let mut fields: Vec<&str> = vec![
        "runtime",
        "source.inline",
        "source.inlinePath",
        "source.repoURL",
        "source.commitSHA",
        "mode.task",
        "mode.task.entrypoint",
        "mode.task.args",
        "mode.function.handler",
        "mode.function.idleTimeoutSeconds",
        "workspace.name",
        "workspace.kind",
        "workspace.apiGroup",
        "resources.requests",
        "env[].name",
        "env[].value",
        "env[].valueFrom.secretKeyRef",
        "env[].valueFrom.configMapKeyRef",
        "timeout",
        "cancelRequested",
        "retryPolicy.maxAttempts",
        "retryPolicy.backoff",
        "retryPolicy.retryableReasons",
        "ttlSecondsAfterFinished",
    ];
    fields.extend(affinity.iter().map(String::as_str));

    let forms: &[Form] = &[
        ("inline source with an empty task", |s| {
            has(s, "/source/inline") && s["mode"]["task"] == serde_json::json!({})
        }),
        ("task args without source", |s| {
            has(s, "/mode/task/args") && !has(s, "/source")
        }),
        ("Git source with entrypoint and args", |s| {
            has(s, "/source/repoURL")
                && has(s, "/mode/task/entrypoint")
                && has(s, "/mode/task/args")
        }),
        ("inline source with entrypoint and args", |s| {
            has(s, "/source/inline") && has(s, "/mode/task/entrypoint") && has(s, "/mode/task/args")
        }),
        ("a function with inline source at inlinePath", |s| {
            has(s, "/source/inlinePath") && has(s, "/mode/function/handler")
        }),
        ("a function with Git source", |s| {
            has(s, "/source/repoURL") && has(s, "/mode/function")
        }),
        ("a function without source", |s| {
            has(s, "/mode/function") && !has(s, "/source")
        }),
        ("a workspace by name only", |s| {
            s["workspace"].as_object().is_some_and(|w| w.len() == 1)
        }),
    ];
    accepted_and_stored_unpruned("runs.yaml", "Run", &fields, forms).await;
}

#[testkit::test]
async fn every_documented_runtime_form_is_accepted_strictly_and_stored_unpruned() {
    let fields = [
        "port",
        "replicas",
        "daemonImage",
        "capacity.resources",
        "template.metadata.labels",
        "template.spec.serviceAccountName",
        "template.spec.nodeSelector",
        "template.spec.tolerations[].key",
        "template.spec.tolerations[].operator",
        "template.spec.tolerations[].value",
        "template.spec.tolerations[].effect",
        "template.spec.containers[].name",
        "template.spec.containers[].image",
        "template.spec.containers[].imagePullPolicy",
        "template.spec.containers[].args",
        "template.spec.containers[].env",
        "template.spec.containers[].ports",
        "template.spec.containers[].resources.requests",
        "template.spec.containers[].resources.limits",
        "workspace.persistentVolumeClaim.claimName",
        "workspace.emptyDir.sizeLimit",
        "artifactStore.driver",
        "artifactStore.filesystem.volumeClaimName",
        "artifactStore.s3.bucket",
        "artifactStore.s3.prefix",
        "artifactStore.s3.region",
        "artifactStore.s3.endpoint",
        "artifactStore.s3.forcePathStyle",
        "artifactStore.s3.credentialsSecretName",
        "artifactStore.s3.uploadPartSize",
        "artifactStore.s3.uploadConcurrency",
    ];
    let forms: &[Form] = &[
        ("integer capacity", |s| {
            s["capacity"]["resources"]
                .as_object()
                .is_some_and(|r| r.values().any(Value::is_number))
        }),
        ("quoted capacity", |s| {
            s["capacity"]["resources"]
                .as_object()
                .is_some_and(|r| r.values().any(Value::is_string))
        }),
        ("a capacity resource other than runs", |s| {
            s["capacity"]["resources"]
                .as_object()
                .is_some_and(|r| r.keys().any(|k| k != "runs"))
        }),
        ("a Runtime without spec.port", |s| !has(s, "/port")),
    ];
    // Upstream requires the first container to be named `runtime`: so must every fixture.
    for doc in documents(&fixture_path("runtimes.yaml")) {
        assert_eq!(
            doc["spec"]["template"]["spec"]["containers"][0]["name"], "runtime",
            "{doc}"
        );
    }
    accepted_and_stored_unpruned("runtimes.yaml", "Runtime", &fields, forms).await;
}

#[testkit::test]
async fn every_documented_persistent_workspace_form_is_accepted_strictly_and_stored_unpruned() {
    let fields = ["runtime", "mode", "ttlSecondsAfterUnused", "cleanupPolicy"];
    let forms: &[Form] = &[
        ("cleanupPolicy DeleteAfterTTL", |s| {
            s["cleanupPolicy"] == "DeleteAfterTTL"
        }),
        ("cleanupPolicy Retain", |s| s["cleanupPolicy"] == "Retain"),
        ("only spec.runtime", |s| {
            s.as_object().is_some_and(|s| s.len() == 1)
        }),
    ];
    accepted_and_stored_unpruned(
        "persistentworkspaces.yaml",
        "PersistentWorkspace",
        &fields,
        forms,
    )
    .await;
}

#[testkit::test]
async fn a_run_with_both_task_and_function_is_refused() {
    let ns = TestNs::new("upstream-mode").await;
    let both = "\
apiVersion: kruntimes.io/v1alpha1
kind: Run
metadata:
  name: two-modes
spec:
  runtime: python
  mode:
    task:
      args: [\"python\", \"job.py\"]
    function:
      handler: job.entry
";
    let (out, stdout, stderr) = apply(&ns.name, "-", Some(both));
    assert!(
        !out.status.success(),
        "a Run with both modes was accepted: {stdout}"
    );
    assert!(
        stderr.contains("exactly one of task or function"),
        "refused for another reason: {stderr}"
    );
    let (out, _, stderr) =
        output(support::kubectl().args(["get", "runs.kruntimes.io/two-modes", "-n", &ns.name]));
    assert!(!out.status.success(), "the refused Run exists");
    assert!(stderr.contains("NotFound"), "{stderr}");
}

#[testkit::test]
async fn cancel_requested_may_go_from_false_to_true_but_not_back() {
    let ns = TestNs::new("upstream-cancel").await;
    let run = |cancel: bool| {
        format!(
            "\
apiVersion: kruntimes.io/v1alpha1
kind: Run
metadata:
  name: cancel-once
spec:
  runtime: bash
  mode:
    task:
      args: [\"sleep 600\"]
  cancelRequested: {cancel}
"
        )
    };
    let cancel_requested =
        || get(&ns.name, "Run", "cancel-once")["spec"]["cancelRequested"].clone();

    let (out, _, stderr) = apply(&ns.name, "-", Some(&run(false)));
    assert!(out.status.success(), "create: {stderr}");
    let (out, _, stderr) = apply(&ns.name, "-", Some(&run(true)));
    assert!(out.status.success(), "false -> true was refused: {stderr}");
    assert_eq!(cancel_requested(), true);

    let (out, stdout, stderr) = apply(&ns.name, "-", Some(&run(false)));
    assert!(
        !out.status.success(),
        "true -> false was accepted: {stdout}"
    );
    assert!(
        stderr.contains("cancelRequested may not transition from true to false"),
        "refused for another reason: {stderr}"
    );
    assert_eq!(cancel_requested(), true);
}
