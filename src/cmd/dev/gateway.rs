//! The gateway on a control plane without kube-controller-manager or kube-proxy (`dev`'s, and
//! the tests'): the shipped objects the aggregation layer needs (the system's Namespace, the
//! gateway's ServiceAccount and APIService, from `deploy/`), and a Service whose endpoints are
//! this host, written here because nothing else fills them.
//!
//! It must not start the gateway (the scheduler does, with `--gateway-bind-address` on the
//! address [`host_ip`] finds) nor hold any of its settings.

use std::net::Ipv4Addr;

use anyhow::{Context as _, anyhow};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use crate::cmd::install::system;
use crate::manager::gateway::serving::APISERVICE;

/// The gateway's Service (and its Endpoints), as `deploy/` names it.
pub const SERVICE: &str = "kubectl-kruntimes-gateway";

/// The ServiceAccount whose tokens the gateway presents to runtimed, as `deploy/` names it.
pub const SERVICE_ACCOUNT: &str = "kubectl-kruntimes-scheduler";

/// This host's address on its default route: the API server's Endpoints may not name a
/// loopback address, so the aggregation layer reaches the gateway there. `None` on a machine
/// with no route (offline). Sends nothing: a UDP socket only picks its source address.
pub fn host_ip() -> Option<Ipv4Addr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // TEST-NET-2: never a real peer.
    socket.connect((Ipv4Addr::new(198, 51, 100, 1), 9)).ok()?;
    match socket.local_addr().ok()?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Some(ip),
        _ => None,
    }
}

/// Applies what routes `subresources.kruntimes.io` to a gateway listening on `ip:port`: the
/// system's Namespace, the gateway's ServiceAccount and APIService from `deploy/`, and the
/// Service, Endpoints and EndpointSlice naming `ip:port`. Idempotent (server-side apply), so
/// a restarted `dev` on another port moves them.
pub async fn register(client: &Client, ip: Ipv4Addr, port: u16) -> anyhow::Result<()> {
    let objects = system::objects(crate::cmd::cli::DEFAULT_IMAGE)?;
    let shipped = |kind: &str, name: &str| -> anyhow::Result<DynamicObject> {
        objects
            .iter()
            .find(|o| o.types.as_ref().is_some_and(|t| t.kind == kind) && o.name_any() == name)
            .cloned()
            .ok_or_else(|| anyhow!("deploy/scheduler.yaml has no {kind} {name}"))
    };
    let ns = system::NAMESPACE;
    let apply = PatchParams::apply("kubectl-kruntimes-dev").force();
    let failed = |what: &str| format!("cannot apply the gateway's {what}");
    Api::<Namespace>::all(client.clone())
        .patch(ns, &apply, &Patch::Apply(shipped("Namespace", ns)?))
        .await
        .with_context(|| failed("Namespace"))?;
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(
            SERVICE_ACCOUNT,
            &apply,
            &Patch::Apply(shipped("ServiceAccount", SERVICE_ACCOUNT)?),
        )
        .await
        .with_context(|| failed("ServiceAccount"))?;
    Api::<APIService>::all(client.clone())
        .patch(
            APISERVICE,
            &apply,
            &Patch::Apply(shipped("APIService", APISERVICE)?),
        )
        .await
        .with_context(|| failed("APIService"))?;
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": ns},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
    });
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(SERVICE, &apply, &Patch::Apply(service))
        .await
        .with_context(|| failed("Service"))?;
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": SERVICE, "namespace": ns},
        "subsets": [{"addresses": [{"ip": ip.to_string()}], "ports": [{"name": "https", "port": port}]}],
    });
    Api::<Endpoints>::namespaced(client.clone(), ns)
        .patch(SERVICE, &apply, &Patch::Apply(endpoints))
        .await
        .with_context(|| failed("Endpoints"))?;
    let slice_name = format!("{SERVICE}-1");
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name, "namespace": ns,
                     "labels": {"kubernetes.io/service-name": SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .patch(&slice_name, &apply, &Patch::Apply(slice))
        .await
        .with_context(|| failed("EndpointSlice"))?;
    Ok(())
}
