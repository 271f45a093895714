//! `kubectl kruntimes logs run/NAME [-f] [--tail N]`: a Run's output as its runtimed keeps it
//! (`runtimed::runlog`). It reads the Run for its Runtime Pod, checks that the Runtime
//! controller made that Pod ([`trusted_pod`]: the caller's token goes to no Pod that only
//! carries a Runtime's label), and streams runtimed's `/logs/<run>` through the API server's
//! Pod proxy with the caller's token, so whoever may `get` `pods/proxy` and `runs/log` in the
//! namespace may read it, as for `invoke`. An edge: the log itself is runtimed's.

use anyhow::{Context as _, anyhow, bail};
use futures::AsyncBufReadExt as _;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::api::{Run, RunPhase, Runtime, made_for_runtime};
use crate::cli::{GlobalArgs, LogsArgs};
use crate::cmd::explain::parse_target;
use crate::kubeclient::proxy_error;

/// Runs the command: parse, find the Run's Pod, stream its log to stdout.
pub async fn exec(global: &GlobalArgs, args: &LogsArgs) -> anyhow::Result<()> {
    let name =
        parse_target(&args.target, args.name.as_deref()).map_err(|e| anyhow!(e.said_by("logs")))?;
    if args.tail < -1 {
        bail!(
            "--tail {}: give a number of lines, or -1 for all of them",
            args.tail
        );
    }
    let target = crate::kubeclient::connect(global).await?;
    let run = target.get_run(&name).await?;
    let pod = pod_of(&run, &name)?;
    trusted_pod(&target, &run, &pod).await?;
    stream(&target, &name, &pod, args.follow, args.tail).await
}

/// Streams the log of Run `name` from the runtimed of Pod `pod` to stdout, line by line; with
/// `follow`, until its execution ends.
pub async fn stream(
    target: &crate::kubeclient::Target,
    name: &str,
    pod: &str,
    follow: bool,
    tail: i64,
) -> anyhow::Result<()> {
    let rest = format!("logs/{name}{}", query(follow, tail));
    let request = target
        .as_caller(http::Request::get(target.runtimed_path(pod, &rest)))?
        .body(Vec::new())
        .context("building the log request")?;
    let mut body =
        target.client.request_stream(request).await.map_err(|e| {
            proxy_error(e, &format!("run/{name} on Pod {pod}: cannot read its log"))
        })?;
    // Line by line, so that a follower sees each line as it comes.
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = body
            .read_until(b'\n', &mut line)
            .await
            .with_context(|| format!("reading the log of run/{name} from Pod {pod}"))?;
        if n == 0 {
            return Ok(());
        }
        crate::output::write_stdout(&String::from_utf8_lossy(&line))
            .context("writing to stdout")?;
    }
}

/// The Pod whose runtimed keeps the Run's log, or why there is none yet.
pub fn pod_of(run: &Run, name: &str) -> anyhow::Result<String> {
    let phase = run.phase();
    let pod = run.status.as_ref().and_then(|s| s.assigned_pod.clone());
    match pod {
        Some(pod) if phase != RunPhase::Pending => Ok(pod),
        _ => bail!(
            "run/{name} is {} and has not run on a Runtime Pod yet, so it has no log (see kubectl kruntimes explain run/{name})",
            phase.as_str()
        ),
    }
}

/// The UID of the Run's Runtime, which the Pods its controller made name as their controller.
pub async fn runtime_uid(target: &crate::kubeclient::Target, run: &Run) -> anyhow::Result<String> {
    let runtimes: Api<Runtime> = Api::namespaced(target.client.clone(), &target.namespace);
    let runtime = &run.spec.runtime;
    match runtimes.get_opt(runtime).await {
        Ok(Some(found)) => Ok(found.metadata.uid.unwrap_or_default()),
        Ok(None) => bail!(
            "Runtime {runtime} of run/{} not found in namespace {}: no Pod of it can be trusted with your credentials",
            run.metadata.name.as_deref().unwrap_or_default(),
            target.namespace
        ),
        Err(e) => Err(target.explain_error(e, &format!("reading Runtime {runtime}"))),
    }
}

/// Succeeds when Pod `pod` is the one the Run was bound to (its UID is the Run's
/// `status.assignedPodUID`, where recorded) and one the Runtime controller made for the Run's
/// Runtime ([`made_for_runtime`]); the caller's credentials go to its runtimed, and to no Pod
/// that only carries the Runtime's label.
pub async fn trusted_pod(
    target: &crate::kubeclient::Target,
    run: &Run,
    pod: &str,
) -> anyhow::Result<()> {
    let runtime_uid = runtime_uid(target, run).await?;
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    let name = run.metadata.name.as_deref().unwrap_or_default();
    // The Pod the scheduler bound the Run to, by UID (a status field only the scheduler and
    // that Pod's runtimed may write), when the Run records it: a Pod made again under the
    // same name, even one whose owner reference was copied, is another Pod.
    let bound_uid = run.status.as_ref().and_then(|s| s.assigned_pod_uid.clone());
    match pods.get_opt(pod).await {
        Ok(Some(found))
            if bound_uid
                .as_deref()
                .is_some_and(|uid| found.metadata.uid.as_deref() != Some(uid)) =>
        {
            bail!(
                "Pod {pod} is not the Pod run/{name} was bound to (its UID differs from status.assignedPodUID); not sending your credentials to it"
            )
        }
        Ok(Some(found)) if made_for_runtime(&found, &runtime_uid) => Ok(()),
        Ok(Some(_)) => bail!(
            "Pod {pod}, which run/{name} names, was not made by the Runtime controller for Runtime {} (it has no controller reference to that Runtime); not sending your credentials to it",
            run.spec.runtime
        ),
        Ok(None) => bail!("Pod {pod} of run/{name} no longer exists, and its log with it"),
        Err(e) => Err(target.explain_error(e, &format!("reading Pod {pod}"))),
    }
}

/// The query of runtimed's `/logs/<run>` (the kubelet's names for the same options).
fn query(follow: bool, tail: i64) -> String {
    let mut parts = Vec::new();
    if follow {
        parts.push("follow=true".to_string());
    }
    if tail >= 0 {
        parts.push(format!("tailLines={tail}"));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!("?{}", parts.join("&")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    #[test]
    fn the_query_carries_follow_and_tail() {
        assert_eq!(query(false, -1), "");
        assert_eq!(query(true, -1), "?follow=true");
        assert_eq!(query(true, 20), "?follow=true&tailLines=20");
        assert_eq!(query(false, 0), "?tailLines=0");
    }

    #[test]
    fn only_a_pod_whose_controller_is_the_runtime_by_uid_is_trusted() {
        let owned = |api_version: &str, kind: &str, uid: &str, controller: Option<bool>| {
            let mut pod = crate::testing::pod("p").build();
            pod.metadata.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: "python".into(),
                    uid: uid.into(),
                    controller,
                    ..Default::default()
                },
            ]);
            pod
        };
        assert!(made_for_runtime(
            &owned("kruntimes.io/v1alpha1", "Runtime", "u1", Some(true)),
            "u1"
        ));
        // Another Runtime of the same name (deleted and made again), not the controller, not a
        // Runtime, or no reference at all: a label alone is not trust.
        assert!(!made_for_runtime(
            &owned("kruntimes.io/v1alpha1", "Runtime", "u0", Some(true)),
            "u1"
        ));
        assert!(!made_for_runtime(
            &owned("kruntimes.io/v1alpha1", "Runtime", "u1", None),
            "u1"
        ));
        assert!(!made_for_runtime(
            &owned("apps/v1", "ReplicaSet", "u1", Some(true)),
            "u1"
        ));
        assert!(!made_for_runtime(&crate::testing::pod("p").build(), "u1"));
        assert!(!made_for_runtime(
            &owned("kruntimes.io/v1alpha1", "Runtime", "", Some(true)),
            ""
        ));
    }

    #[test]
    fn a_run_that_never_ran_has_no_log_and_says_why() {
        let pending = run("a").build();
        let err = pod_of(&pending, "a").unwrap_err().to_string();
        assert!(err.starts_with("run/a is Pending and has not run"), "{err}");
        let scheduled = run("b").on("pod-1").build();
        assert_eq!(pod_of(&scheduled, "b").unwrap(), "pod-1");
    }
}
