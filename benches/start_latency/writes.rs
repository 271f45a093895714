//! `writes`: kube-apiserver's CPU for each kind of write a Run costs, one write at a time (no
//! scheduler, runtimed or other watcher of Runs running), with kruntimes' admission policies
//! as `install` leaves them and then with their bindings deleted.
//!
//! Each write is the one the product sends, built by the product's own code: the scheduler's
//! Bind ([`status::set_bound`] through [`status_patch`], a merge patch of the status
//! subresource guarded by the resourceVersion), runtimed's claim ([`status::set_admitted`],
//! the object PUT to the status subresource) and terminal write ([`status::set_terminal`],
//! PUT), and one Event as runtimed publishes it. The same writes with the other verb are
//! measured too (Bind as PUT, terminal as merge patch), which is how each write's verb was
//! chosen, and so are server-side apply and a terminal write under a second field manager
//! (which is how keeping one manager for both binaries was checked), and both with
//! `fieldValidation=Ignore` (whether skipping the strict decode pays), and the terminal PUT in
//! CBOR both ways (KEP-4222; kube-rs speaks only JSON, so the request is built by hand and the
//! body encoded with `ciborium`; merge patches have no CBOR form). CPU is utime + stime of
//! kube-apiserver over [`N`] writes of a kind, divided by N.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruntimes::api::status::{self, Outcome};
use kruntimes::api::{Run, patch_params, post_params};
use kruntimes::scheduler::status_patch::status_patch;
use kruntimes::testing::{pod, run};
use kube::api::{Api, Patch};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource as _, ResourceExt as _};

use crate::support::{
    self,
    measure::cpu_seconds,
    world::{Create, TestNs, eventually},
};

/// Writes of each kind measured.
const N: usize = 200;

/// How a status write is sent.
#[derive(Clone, Copy)]
enum Verb {
    /// A JSON merge patch of what changed, guarded by the resourceVersion.
    Patch,
    /// The whole object PUT, guarded by its resourceVersion.
    Put,
    /// The whole object PUT, guarded by its resourceVersion, under another field manager than
    /// the product's one: what a second manager (one per binary, say) would cost.
    PutAs(&'static str),
    /// Server-side apply of the whole status, forced (the fields were set by updates).
    Apply,
    /// [`Verb::Patch`] with `fieldValidation=Ignore`: the API server skips its strict decode
    /// of the body, which the default (`Warn`) runs to report unknown fields.
    PatchIgnore,
    /// [`Verb::Put`] with `fieldValidation=Ignore`.
    PutIgnore,
    /// [`Verb::Put`] with the body and the answer in CBOR (`application/cbor`).
    PutCbor,
}

/// The self-described CBOR tag a Kubernetes CBOR body starts with.
const SELF_DESCRIBED: u64 = 55799;

/// `PUT runs/NAME/status` of `new` in CBOR, answered in CBOR. The answer is decoded as CBOR
/// (its strings are byte strings, as Kubernetes encodes them, so not into a `Run`): the Run as
/// sent is returned, this write being the last of its chain.
async fn put_cbor(api: &Api<Run>, new: &Run) -> Run {
    let name = new.name_any();
    let mut body = Vec::new();
    ciborium::into_writer(
        &ciborium::tag::Required::<_, SELF_DESCRIBED>(new),
        &mut body,
    )
    .expect("encode the Run in CBOR");
    let request = kube::core::Request::new(Run::url_path(&(), new.namespace().as_deref()))
        .replace_subresource("status", &name, &post_params(), body)
        .unwrap();
    let (mut parts, body) = request.into_parts();
    let cbor = http::HeaderValue::from_static("application/cbor");
    parts
        .headers
        .insert(http::header::CONTENT_TYPE, cbor.clone());
    parts.headers.insert(http::header::ACCEPT, cbor);
    let response = api
        .clone()
        .into_client()
        .send(http::Request::from_parts(parts, body.into()))
        .await
        .unwrap_or_else(|e| panic!("PUT the status of {name} in CBOR: {e}"));
    let (parts, body) = response.into_parts();
    let bytes = body.collect_bytes().await.expect("the answer");
    assert!(
        parts.status.is_success(),
        "PUT the status of {name} in CBOR: {} {}",
        parts.status,
        String::from_utf8_lossy(&bytes)
    );
    let answer: ciborium::Value = ciborium::from_reader(&bytes[..])
        .unwrap_or_else(|e| panic!("decode the CBOR answer for {name}: {e}"));
    assert!(
        matches!(answer, ciborium::Value::Tag(SELF_DESCRIBED, _)),
        "the answer for {name} is not self-described CBOR: {answer:?}"
    );
    new.clone()
}

/// One status write applied to a Run.
async fn write_status(api: &Api<Run>, run: &Run, verb: Verb, change: impl Fn(&mut Run)) -> Run {
    let mut new = run.clone();
    change(&mut new);
    let name = run.name_any();
    match verb {
        Verb::Patch => {
            let patch = status_patch(run, new.status.as_ref().unwrap()).expect("a change");
            api.patch_status(&name, &patch_params(), &Patch::Merge(patch))
                .await
                .unwrap_or_else(|e| panic!("patch the status of {name}: {e}"))
        }
        Verb::Put => api
            .replace_status(&name, &post_params(), &new)
            .await
            .unwrap_or_else(|e| panic!("replace the status of {name}: {e}")),
        Verb::PutAs(manager) => {
            let params = kube::api::PostParams {
                field_manager: Some(manager.into()),
                ..post_params()
            };
            api.replace_status(&name, &params, &new)
                .await
                .unwrap_or_else(|e| panic!("replace the status of {name} as {manager}: {e}"))
        }
        Verb::PatchIgnore => {
            let patch = status_patch(run, new.status.as_ref().unwrap()).expect("a change");
            let params = kube::api::PatchParams {
                field_validation: Some(kube::api::ValidationDirective::Ignore),
                ..patch_params()
            };
            api.patch_status(&name, &params, &Patch::Merge(patch))
                .await
                .unwrap_or_else(|e| panic!("patch the status of {name}: {e}"))
        }
        Verb::PutIgnore => {
            // kube's PostParams has no fieldValidation: the product's request, with it added.
            let body = serde_json::to_vec(&new).unwrap();
            let request = kube::core::Request::new(Run::url_path(&(), run.namespace().as_deref()))
                .replace_subresource("status", &name, &post_params(), body)
                .unwrap();
            let (mut parts, body) = request.into_parts();
            parts.uri = format!("{}&fieldValidation=Ignore", parts.uri)
                .parse()
                .unwrap();
            api.clone()
                .into_client()
                .request::<Run>(http::Request::from_parts(parts, body))
                .await
                .unwrap_or_else(|e| panic!("replace the status of {name}: {e}"))
        }
        Verb::PutCbor => put_cbor(api, &new).await,
        Verb::Apply => {
            let intent = serde_json::json!({
                "apiVersion": Run::api_version(&()),
                "kind": Run::kind(&()),
                "status": new.status,
            });
            let params = kube::api::PatchParams::apply(kruntimes::api::FIELD_MANAGER).force();
            api.patch_status(&name, &params, &Patch::Apply(intent))
                .await
                .unwrap_or_else(|e| panic!("apply the status of {name}: {e}"))
        }
    }
}

/// kube-apiserver's CPU ms per write for `writes`, one after the other.
async fn per_write<T>(
    apiserver: u32,
    items: Vec<T>,
    write: impl AsyncFn(T) -> Run,
) -> (f64, Vec<Run>) {
    let n = items.len();
    let before = cpu_seconds(apiserver);
    let mut out = Vec::with_capacity(n);
    for item in items {
        out.push(write(item).await);
    }
    ((cpu_seconds(apiserver) - before) * 1e3 / n as f64, out)
}

/// The rows of one column: (write, CPU ms per write).
async fn column(ns: &TestNs, apiserver: u32, pod_uid: &str) -> Vec<(&'static str, f64)> {
    let api = ns.runs();
    let now = || Time(jiff::Timestamp::now());
    let create = async |i: usize| {
        let mut object = run(&format!("w-{i:04}")).task(&["true"]).build();
        object.metadata.namespace = None;
        object.metadata.uid = None;
        api.create(&post_params(), &object)
            .await
            .unwrap_or_else(|e| panic!("create a Run: {e}"))
    };
    let bind = |verb| {
        let api = api.clone();
        async move |run: Run| {
            write_status(&api, &run, verb, |r| {
                let s = r.status.get_or_insert_with(Default::default);
                status::set_bound(s, "rt-0", pod_uid, &now());
            })
            .await
        }
    };
    let request = run("r").build().request().expect("the default request");
    let claim = async |run: Run| {
        // The product's verb and manager, whatever the row measures around it.
        write_status(&api, &run, Verb::Put, |r| {
            let s = r.status.get_or_insert_with(Default::default);
            status::set_admitted(s, "rt-0", &request, &now());
        })
        .await
    };
    let end = |verb| {
        let api = api.clone();
        async move |run: Run| {
            write_status(&api, &run, verb, |r| {
                let s = r.status.get_or_insert_with(Default::default);
                let message = "execution completed";
                status::set_terminal(s, Outcome::Succeeded, "Succeeded", message, Some(0), &now());
            })
            .await
        }
    };
    let reporter = Reporter {
        controller: kruntimes::telemetry::events::RUNTIMED.into(),
        instance: Some("rt-0".into()),
    };
    let client = support::client().await;
    let event = async |run: Run| {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        let mut regarding = run.object_ref(&());
        regarding.resource_version = None;
        let note = "execution completed (exit code 0); before that: admitted with {runs: 1} and started the task on Runtime Pod rt-0";
        let event = Event {
            type_: EventType::Normal,
            reason: "Completed".into(),
            note: Some(note.into()),
            action: "Finish".into(),
            secondary: None,
        };
        recorder
            .publish(&event, &regarding)
            .await
            .expect("publish an Event");
        run
    };

    let mut rows = Vec::new();
    let (ms, created) = per_write(apiserver, (0..N).collect(), create).await;
    rows.push(("create: POST runs", ms));
    let (ms, bound) = per_write(apiserver, created, bind(Verb::Patch)).await;
    rows.push(("Bind: merge PATCH runs/status (scheduler)", ms));
    let (ms, claimed) = per_write(apiserver, bound, claim).await;
    rows.push(("claim: PUT runs/status (runtimed)", ms));
    let (ms, ended) = per_write(apiserver, claimed, end(Verb::Put)).await;
    rows.push(("terminal: PUT runs/status (runtimed)", ms));
    let (ms, _) = per_write(apiserver, ended, event).await;
    rows.push(("Event: POST events", ms));

    // The other verbs, and a second manager, each on Runs of their own: the Bind's verb and
    // its row (none: the product's Bind, not measured again), the terminal write's and its row.
    let variants = [
        (
            Verb::Put,
            Some("Bind as PUT runs/status"),
            Verb::Patch,
            "terminal as merge PATCH runs/status",
        ),
        (
            Verb::Apply,
            Some("Bind as server-side apply runs/status"),
            Verb::Apply,
            "terminal as server-side apply runs/status",
        ),
        (
            Verb::Patch,
            None,
            Verb::PutAs("kruntimes-second"),
            "terminal PUT by a second field manager",
        ),
        (
            Verb::PatchIgnore,
            Some("Bind as merge PATCH, fieldValidation=Ignore"),
            Verb::PutIgnore,
            "terminal as PUT, fieldValidation=Ignore",
        ),
        (
            Verb::Patch,
            None,
            Verb::PutCbor,
            "terminal as PUT in CBOR (request and answer)",
        ),
    ];
    for (k, (bind_verb, bind_row, end_verb, end_row)) in variants.into_iter().enumerate() {
        let first = (k + 1) * N;
        let (_, created) = per_write(apiserver, (first..first + N).collect(), create).await;
        let (ms, bound) = per_write(apiserver, created, bind(bind_verb)).await;
        if let Some(row) = bind_row {
            rows.push((row, ms));
        }
        let (_, claimed) = per_write(apiserver, bound, claim).await;
        let (ms, _) = per_write(apiserver, claimed, end(end_verb)).await;
        rows.push((end_row, ms));
    }
    rows
}

/// Deletes the bindings of kruntimes' admission policies, then waits until a Run that only
/// the Run policy refuses is admitted (a dry run): the API server's policy informers have
/// seen the deletions.
async fn unbind_policies(ns: &TestNs) {
    for kind in [
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicybindings",
    ] {
        let out = support::kubectl()
            .args(["delete", kind, "--all"])
            .output()
            .unwrap();
        support::ok(&out, &format!("kubectl delete {kind} --all"));
    }
    let api = ns.runs();
    eventually(
        Duration::from_secs(30),
        "the Run policy unbound",
        async || {
            // Two modes at once: only the policy refuses it (the CRD's schema allows it).
            let mut invalid = run("invalid").function("h").build();
            invalid.metadata.namespace = None;
            invalid.metadata.uid = None;
            invalid.spec.mode.task = run("t").build().spec.mode.task;
            let dry = kube::api::PostParams {
                dry_run: true,
                ..post_params()
            };
            api.create(&dry, &invalid)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        },
    )
    .await;
}

/// Prints the table.
pub async fn measure(apiserver: u32) {
    let started = Instant::now();
    let ns = TestNs::new("writes").await;
    let rt = pod("rt-0")
        .capacity(&[("runs", 1_000_000)])
        .create(&ns)
        .await;
    let pod_uid = rt.uid().unwrap();
    let with = column(&ns, apiserver, &pod_uid).await;
    unbind_policies(&ns).await;
    let ns = TestNs::new("writes-unbound").await;
    let rt = pod("rt-0")
        .capacity(&[("runs", 1_000_000)])
        .create(&ns)
        .await;
    let without = column(&ns, apiserver, &rt.uid().unwrap()).await;
    println!();
    println!("kube-apiserver CPU ms per write, {N} writes of each kind one at a time:");
    println!(
        "{:<44} {:>14} {:>18}",
        "write", "as installed", "policies unbound"
    );
    for ((write, on), (_, off)) in with.iter().zip(&without) {
        println!("{write:<44} {on:>14.2} {off:>18.2}");
    }
    eprintln!("(writes measured in {:.0?})", started.elapsed());
}
