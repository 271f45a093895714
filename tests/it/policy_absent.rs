//! Without the admission policy kruntimes fails closed: the Runtime controller creates no
//! Runtime Pod and the Runtime says why (`ReplicaFailure=True/AdmissionPolicyMissing`);
//! `scheduler run` says once, at start, that Runtime Pods are not restricted (or that it cannot
//! tell), and a Runtime Pod made before the policy went still runs its Runs, its token able to
//! write any Run (what the warning is about). A suite (a process) of its own because its
//! control plane must never get the policy (every other suite installs it with `install`):
//! only the CRDs are applied here.

use testkit as support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use kruntimes::api::{FIELD_MANAGER, Run, RunPhase, RunStatus, Runtime};
use kruntimes::runtime::identity;
use kruntimes::testing::{pod, run, runtime};
use support::tokens;
use support::world::{self, Create, RuntimedProcess, TestNs, create_in, eventually, http_get};

const WAIT: Duration = Duration::from_secs(60);
const NOT_RESTRICTED: &str = "Runtime Pods are not restricted: ValidatingAdmissionPolicy kubectl-kruntimes-runtimed is not installed in";
const CANNOT_TELL: &str = "cannot tell whether Runtime Pods are restricted in";

/// The CRDs and runtimed's ClusterRole (what `install` applied before the policy existed, but
/// for the ClusterRole that the Runtime controller binds), once per process.
async fn crds_only(client: &Client) {
    // Server-side applied: both tests of this suite get here at once.
    let role = kruntimes::runtime::identity::cluster_role().unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone())
        .patch(
            &role.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&role),
        )
        .await
        .unwrap_or_else(|e| panic!("apply runtimed's ClusterRole: {e}"));
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in kruntimes::cmd::install::crds() {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
        tokio::time::timeout(
            WAIT,
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} not Established"))
        .unwrap();
    }
    let policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy> =
        Api::all(client.clone());
    assert!(
        policies
            .get_opt(kruntimes::policy::runtimed::NAME)
            .await
            .unwrap()
            .is_none(),
        "this suite's control plane must not have the policy"
    );
}

/// A fresh namespace on this suite's control plane. Not [`TestNs::new`]: that runs `install`,
/// which would apply the policy.
async fn namespace(client: &Client, prefix: &str) -> TestNs {
    crds_only(client).await;
    let name = support::namespace(client, prefix).await;
    TestNs {
        client: client.clone(),
        name,
    }
}

/// `scheduler run` for one namespace, its log in a file; killed on drop.
struct Scheduler {
    child: Child,
    log: PathBuf,
}

impl Scheduler {
    async fn start(kubeconfig: &Path, ns: &str, log: PathBuf) -> Scheduler {
        let health = support::free_port();
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(support::binary())
            .args([
                "scheduler",
                "run",
                "--watch-namespace",
                ns,
                "--leader-elect=false",
            ])
            .arg("--metrics-bind-address=0")
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start the scheduler binary");
        let mut scheduler = Scheduler { child, log };
        let what = "the scheduler to answer /readyz with 200";
        eventually(WAIT, what, async || {
            if let Some(status) = scheduler.child.try_wait().unwrap() {
                panic!("scheduler exited early ({status}):\n{}", scheduler.log());
            }
            let answer = match http_get(health, "/readyz").await {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => format!("{code} {body}"),
                Err(e) => e.to_string(),
            };
            Err(format!(
                "{answer}\n--- scheduler log ---\n{}",
                scheduler.log()
            ))
        })
        .await;
        scheduler
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many log lines contain `text`.
    fn lines_with(&self, text: &str) -> usize {
        self.log().lines().filter(|l| l.contains(text)).count()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Runtime `python` of one Pod, capacity 4 runs (its Pod runs as the service account the
/// scheduler makes for it).
async fn runtimed_runtime(ns: &TestNs) {
    let python = runtime("python").capacity(&[("runs", 4)]).build();
    create_in(ns, python).await;
}

#[testkit::test]
async fn without_the_policy_no_runtime_pod_is_made_and_the_scheduler_warns_once_that_pods_are_unrestricted()
 {
    let admin = support::client().await;
    let ns = namespace(&admin, "no-policy").await;
    let dir = tempfile::tempdir().unwrap();
    runtimed_runtime(&ns).await;
    let scheduler = Scheduler::start(
        &support::control_plane().kubeconfig,
        &ns.name,
        dir.path().join("scheduler.log"),
    )
    .await;

    // Fail closed: without the policy the Runtime controller creates no Runtime Pod (whose
    // token could write any Run), and the Runtime says why.
    let runtimes: Api<Runtime> = ns.api();
    let condition = eventually(WAIT, "the Runtime to say why it has no Pod", async || {
        let python = runtimes.get("python").await.unwrap();
        let conditions = python.status.map(|s| s.conditions).unwrap_or_default();
        let failure = conditions.into_iter().find(|c| c.type_ == "ReplicaFailure");
        failure.ok_or("no ReplicaFailure condition yet")
    })
    .await;
    assert_eq!(condition.reason, "AdmissionPolicyMissing");
    assert!(
        condition.message.starts_with(
            "not creating Runtime Pods: ValidatingAdmissionPolicy kubectl-kruntimes-runtimed is not installed"
        ),
        "{}",
        condition.message
    );
    let pods = Api::<Pod>::namespaced(admin.clone(), &ns.name);
    assert!(
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // What it guards against, with a Runtime Pod made before the policy went (by an earlier
    // release, or before an uninstall), its account and binding as the controller makes them:
    // runtimed with its Pod-bound token runs a Run end to end...
    let python = runtimes.get("python").await.unwrap();
    let (account, binding) = identity::objects(&python).expect("the Runtime's account");
    create_in(&ns, account).await;
    create_in(&ns, binding).await;
    let mut made = pod("python-0").capacity(&[("runs", 4)]).build();
    made.spec.as_mut().unwrap().service_account_name = Some(identity::name("python"));
    create_in(&ns, made).await;
    let pod = pods.get("python-0").await.unwrap();
    ns.set_ready(&pod.name_any(), true).await;
    let token = tokens::pod_bound_token(&admin, &ns.name, &tokens::account_of(&pod), &pod).await;
    let kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns.name);
    let heartbeat = ["--heartbeat-interval", "1s"];
    let runtimed = RuntimedProcess::start_as(&kubeconfig, &pod, &heartbeat);
    run("r").create(&ns).await;
    let status = ns
        .wait_runs(WAIT, "r succeeded", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "r" && r.phase() == RunPhase::Succeeded)
                .and_then(|r| r.status.clone())
        })
        .await;
    drop(runtimed);
    assert_eq!(
        status.assigned_pod.as_deref(),
        Some(pod.name_any().as_str())
    );

    // ...and the same token may end a Run that is not its Pod's: what the warning is about.
    run("stranger").create(&ns).await;
    let as_pod = Api::<Run>::namespaced(support::client_for(&kubeconfig).await, &ns.name);
    let what = "the Pod's token to end the Run stranger";
    eventually(WAIT, what, async || {
        // The scheduler may write the Run meanwhile (409): read it again and retry.
        let mut taken = as_pod.get("stranger").await.unwrap();
        taken.status = Some(RunStatus {
            phase: Some(RunPhase::Succeeded),
            ..Default::default()
        });
        match as_pod
            .replace_status("stranger", &PostParams::default(), &taken)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Err(s.message),
            Err(e) => panic!("without the policy a Pod's token may write any Run: {e}"),
        }
    })
    .await;

    assert_eq!(
        scheduler.lines_with(NOT_RESTRICTED),
        1,
        "expected one warning:\n{}",
        scheduler.log()
    );
    assert!(
        scheduler
            .log()
            .contains("run `kubectl kruntimes install` to install it"),
        "{}",
        scheduler.log()
    );
}

#[testkit::test]
async fn a_scheduler_that_cannot_read_the_policy_says_so_once_and_schedules_anyway() {
    let admin = support::client().await;
    let ns = namespace(&admin, "no-policy-read").await;
    let dir = tempfile::tempdir().unwrap();

    // The shipped scheduler ClusterRole minus its rule on the admission policy.
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/scheduler.yaml"
    ))
    .unwrap();
    let mut role: ClusterRole = kruntimes::util::yaml::documents(&shipped)
        .unwrap()
        .into_iter()
        .find(|v| v["kind"] == "ClusterRole")
        .map(|v| serde_json::from_value(v).unwrap())
        .unwrap();
    let before = role.rules.as_ref().unwrap().len();
    role.rules.as_mut().unwrap().retain(|r| {
        !r.api_groups
            .iter()
            .flatten()
            .any(|g| g == "admissionregistration.k8s.io")
    });
    assert_eq!(role.rules.as_ref().unwrap().len(), before - 1);
    let name = format!("scheduler-without-policy-read-{ns}");
    role.metadata = serde_json::from_value(json!({"name": name})).unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "scheduler"}})).unwrap();
    create_in(&ns, sa).await;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "scheduler", "namespace": ns.name}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let token = tokens::unbound_token(&admin, &ns.name, "scheduler").await;
    let kubeconfig = tokens::token_kubeconfig(dir.path(), "scheduler", &token, &ns.name);

    // A Runtime Pod made here (the Runtime keeps 0 of its own), Ready with a heartbeat.
    pod("python-0").capacity(&[("runs", 4)]).create(&ns).await;
    let python = runtime("python").replicas(0).capacity(&[("runs", 4)]);
    python.create(&ns).await;
    // RBAC is cached briefly: retry until the token may list Runs before starting.
    let runs: Api<Run> = Api::namespaced(support::client_for(&kubeconfig).await, &ns.name);
    eventually(WAIT, "the scheduler's RBAC to take effect", async || {
        runs.list(&Default::default()).await.map(|_| ())
    })
    .await;

    let log = dir.path().join("scheduler.log");
    let scheduler = Scheduler::start(&kubeconfig, &ns.name, log).await;
    run("r").create(&ns).await;
    ns.wait_runs(WAIT, "r Scheduled on python-0", |runs| {
        world::pod_of(runs, "r").filter(|p| p == "python-0")
    })
    .await;
    assert_eq!(
        scheduler.lines_with(CANNOT_TELL),
        1,
        "expected one warning:\n{}",
        scheduler.log()
    );
    assert!(
        scheduler.log().contains("is forbidden"),
        "the warning says why: {}",
        scheduler.log()
    );
    assert_eq!(scheduler.lines_with(NOT_RESTRICTED), 0);
}
