//! The runtimed admission policy as the tests meet it: a namespace with the shipped runtimed
//! RBAC and two Runtime Pods whose tokens come from the TokenRequest API bound to them (what
//! the kubelet mounts), the writes runtimed makes, and how a refusal by the policy or by RBAC
//! reads. Used by `tests/it/policy.rs` (admission), `tests/it/runtimed_policy.rs` (runtimed's whole
//! life under it) and `tests/it/rbac.rs` (people's ClusterRoles).

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt as _};
use serde_json::json;

use super::tokens;
use super::world::{Create, TestNs, create_in, eventually};
use kruntimes::api::status::{self, CONDITION_ADMITTED, Outcome, reasons};
use kruntimes::api::{FIELD_MANAGER, Run, RunPhase, RunStatus};
use kruntimes::runtimed::Identity;
use kruntimes::runtimed::heartbeat::{self, desired_lease};
use kruntimes::testing::{RunBuilder, pod, run};

pub const RUNTIMED: &str = "kubectl-kruntimes-runtimed";
/// How the API server words a refusal by this policy.
pub const POLICY_DENIED: &str = "ValidatingAdmissionPolicy 'kubectl-kruntimes-runtimed' with binding 'kubectl-kruntimes-runtimed' denied request: ";
pub const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Fixture: a namespace with the shipped runtimed RBAC, two Runtime Pods A and B running as
// kubectl-kruntimes-runtimed, a client with A's Pod-bound token and one with an unbound token of the
// same service account.

pub struct Fixture {
    pub ns: TestNs,
    /// The admin client of `ns`.
    pub admin: Client,
    pub pod_a: Pod,
    pub pod_b: Pod,
    /// A token bound to Pod A, as A's kubelet would mount it.
    pub as_a: Client,
    /// A token of the same service account bound to nothing.
    pub unbound: Client,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub async fn new(prefix: &str) -> Fixture {
        let ns = TestNs::new(prefix).await;
        let admin = ns.client.clone();
        tokens::runtimed_account(&admin, &ns.name, RUNTIMED).await;
        let pod_a = runtime_pod(&ns, "pod-a").await;
        let pod_b = runtime_pod(&ns, "pod-b").await;
        let dir = tempfile::tempdir().unwrap();
        let token_a = tokens::pod_bound_token(&admin, &ns.name, RUNTIMED, &pod_a).await;
        let token_unbound = tokens::unbound_token(&admin, &ns.name, RUNTIMED).await;
        let kubeconfig = |file, token| tokens::token_kubeconfig(dir.path(), file, token, &ns.name);
        let as_a = super::client_for(&kubeconfig("a", &token_a)).await;
        let unbound = super::client_for(&kubeconfig("unbound", &token_unbound)).await;
        await_enforced(&ns.name, &[&as_a, &unbound]).await;
        Fixture {
            ns,
            admin,
            pod_a,
            pod_b,
            as_a,
            unbound,
            dir,
        }
    }

    pub fn runs(&self, client: &Client) -> Api<Run> {
        Api::namespaced(client.clone(), &self.ns.name)
    }

    pub fn leases(&self, client: &Client) -> Api<Lease> {
        Api::namespaced(client.clone(), &self.ns.name)
    }

    pub fn identity(&self, pod: &Pod) -> Identity {
        Identity {
            pod_name: pod.name_any(),
            namespace: self.ns.name.clone(),
            pod_uid: pod.uid().unwrap(),
        }
    }

    /// A Run of this fixture (labelled `team=a`), Pending and unbound.
    pub fn run(&self, name: &str) -> RunBuilder {
        run(name).labels(&[("team", "a")])
    }

    /// [`Self::run`] as the scheduler binds it: Scheduled on `pod`, with the Pod's real UID.
    pub fn on(&self, name: &str, pod: &Pod) -> RunBuilder {
        self.run(name)
            .on(&pod.name_any())
            .pod_uid(&pod.uid().unwrap())
    }

    /// Creates the Run (and writes its status, if it has one, as the scheduler would).
    /// Returns it as stored.
    pub async fn create(&self, run: RunBuilder) -> Run {
        run.create(&self.ns).await;
        self.get(run.name()).await
    }

    pub async fn get(&self, name: &str) -> Run {
        self.ns.get_run(name).await
    }

    /// Asserts that the Run was not written since `before` (same resourceVersion).
    pub async fn assert_run_unchanged(&self, before: &Run) {
        let now = self.get(&before.name_any()).await;
        assert_eq!(
            now.resource_version(),
            before.resource_version(),
            "Run {} was written",
            before.name_any()
        );
        assert_run_content(&now, before);
    }

    /// The status write runtimed makes: a replace carrying the observed resourceVersion.
    pub async fn write_status(
        &self,
        client: &Client,
        run: &Run,
        change: impl FnOnce(&mut RunStatus),
    ) -> kube::Result<Run> {
        let mut updated = run.clone();
        change(updated.status.get_or_insert_with(Default::default));
        self.runs(client)
            .replace_status(&run.name_any(), &write_params(), &updated)
            .await
    }

    /// The heartbeat write runtimed makes for `me`, held by `holder`.
    pub async fn apply_lease(
        &self,
        client: &Client,
        me: &Identity,
        holder: &str,
    ) -> kube::Result<Lease> {
        self.apply_lease_in(&self.leases(client), me, holder).await
    }

    pub async fn apply_lease_in(
        &self,
        leases: &Api<Lease>,
        me: &Identity,
        holder: &str,
    ) -> kube::Result<Lease> {
        let now = MicroTime(jiff::Timestamp::now());
        let config = heartbeat::Config {
            interval: Duration::from_secs(10),
            duration: Duration::from_secs(40),
        };
        let mut lease = desired_lease(me, &config, &now, &now);
        lease.spec.as_mut().unwrap().holder_identity = Some(holder.to_string());
        leases
            .patch(
                &me.pod_name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&lease),
            )
            .await
    }

    pub async fn assert_lease_unchanged(&self, before: &Lease) {
        let now = self
            .leases(&self.admin)
            .get(&before.name_any())
            .await
            .unwrap();
        assert_eq!(now.resource_version(), before.resource_version());
        assert_eq!(now.spec, before.spec);
    }
}

/// A Runtime Pod object running as kubectl-kruntimes-runtimed with a capacity of 4 runs, as created
/// (there is no kubelet: it never runs, has no status and no heartbeat).
pub async fn runtime_pod(ns: &TestNs, name: &str) -> Pod {
    let mut pod = pod(name).capacity(&[("runs", 4)]).build();
    pod.spec.as_mut().unwrap().service_account_name = Some(RUNTIMED.into());
    pod.status = None;
    create_in(ns, pod).await
}

/// Asserts that spec, labels and status of `now` are those of `before`.
pub fn assert_run_content(now: &Run, before: &Run) {
    let content = |r: &Run| serde_json::to_value((&r.spec, r.labels(), &r.status)).unwrap();
    assert_eq!(
        content(now),
        content(before),
        "Run {} changed",
        before.name_any()
    );
}

/// `object` as the body of a create in `ns` by a client other than the admin: in `ns`, its UID
/// left to the API server, as [`create_in`] sends it for the admin.
pub fn body<K: Resource>(mut object: K, ns: &TestNs) -> K {
    let meta = object.meta_mut();
    meta.namespace = Some(ns.name.clone());
    meta.uid = None;
    object
}

pub fn write_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// runtimed's claim: Running, startTime, Admitted=True.
pub fn claim(status: &mut RunStatus) {
    let now = now();
    status.phase = Some(RunPhase::Running);
    status.start_time = Some(now.clone());
    status::set_condition(
        &mut status.conditions,
        CONDITION_ADMITTED,
        true,
        reasons::ADMITTED,
        "runtimed reserved runs=1",
        &now,
    );
}

/// runtimed's terminal write, through the one terminal helper.
pub fn end(outcome: Outcome, reason: &str, exit_code: Option<i32>) -> impl FnOnce(&mut RunStatus) {
    move |status| {
        assert!(status::set_terminal(
            status,
            outcome,
            reason,
            "the test ended it",
            exit_code,
            &now()
        ));
    }
}

/// Asserts that `result` is this policy's refusal (403) and that its message says `says`.
pub fn assert_refused<T: Debug>(result: kube::Result<T>, says: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert!(
                s.message.contains(POLICY_DENIED),
                "refused, but not by the policy: {}",
                s.message
            );
            assert!(
                s.message.contains(says),
                "the policy's message does not say {says:?}: {}",
                s.message
            );
            assert_eq!(s.code, 403, "{}", s.message);
        }
        other => panic!("expected the policy to refuse (it should say {says:?}), got {other:?}"),
    }
}

/// Asserts that RBAC (not the policy) refuses `result` with "cannot VERB resource ...".
pub fn assert_forbidden_by_rbac<T: Debug>(result: kube::Result<T>, says: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{}", s.message);
            assert!(
                s.message.contains(says),
                "expected {says:?} in: {}",
                s.message
            );
        }
        other => panic!("expected RBAC to refuse ({says:?}), got {other:?}"),
    }
}

/// Waits until the policy is enforced for each of `clients` (tokens of kubectl-kruntimes-runtimed in
/// `ns`): the policy and its binding become active a moment after they are created, RBAC and
/// new tokens a moment after theirs. Probes with a server-side dry run, which persists nothing.
pub async fn await_enforced(ns: &str, clients: &[&Client]) {
    let probe: Lease =
        serde_json::from_value(json!({"metadata": {"name": "policy-probe"}})).unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let leases: Vec<Api<Lease>> = clients
        .iter()
        .map(|client| Api::namespaced((*client).clone(), ns))
        .collect();
    let what = "the policy kubectl-kruntimes-runtimed to be enforced for every token";
    eventually(WAIT, what, async || {
        for (i, leases) in leases.iter().enumerate() {
            match leases.create(&dry_run, &probe).await {
                Err(kube::Error::Api(s)) if s.message.contains(POLICY_DENIED) => {}
                other => return Err(format!("token {i}: {other:?}")),
            }
        }
        Ok(())
    })
    .await
}

/// Waits until `probe` stops failing with 401/403 (RBAC and tokens are cached briefly).
pub async fn await_allowed<T: Debug>(what: &str, mut probe: impl AsyncFnMut() -> kube::Result<T>) {
    let allowed = format!("{what} to be allowed");
    eventually(WAIT, &allowed, async || {
        let probed = probe().await;
        match probed {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if (s.code == 401 || s.code == 403) => Err(s.message),
            Err(e) => panic!("{what}: {e}"),
        }
    })
    .await
}
