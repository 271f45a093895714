//! The gateway's test fixtures on the control plane: its registration with the aggregation
//! layer, Runtime Pods whose runtimed listens on this host, and a [`Spy`] in front of runtimed
//! (shared by `tests/it/gateway.rs` and the latency bench).

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{ContainerPort, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruntimes::api::Runtime;
use kruntimes::testing::pod;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

pub use super::spy::{Options as SpyOptions, Spy};
use super::world::{TestNs, create_in, eventually};

/// A spy on a free port of every address of this host, in front of runtimed's API on
/// `runtimed_port` of 127.0.0.1, moving `token_header` into `Authorization` if given.
pub async fn spy(runtimed_port: u16, token_header: Option<&'static str>) -> Spy {
    Spy::start(SpyOptions {
        listen: SocketAddr::new(IpAddr::from([0, 0, 0, 0]), super::free_port()),
        to: format!("https://127.0.0.1:{runtimed_port}"),
        token_header,
        print: false,
    })
    .await
}

/// What routes the aggregated API to the gateway on this host: the objects `dev` applies.
pub async fn register_gateway(client: &kube::Client, port: u16) {
    kruntimes::cmd::dev::gateway::register(client, host_ip(), port)
        .await
        .unwrap();
}

pub fn host_ip() -> std::net::Ipv4Addr {
    kruntimes::cmd::dev::gateway::host_ip()
        .expect("this machine has no IPv4 route: the aggregation layer cannot reach the gateway")
}

/// A Runtime Pod of `rt` at `ip` whose runtimed API is on `api_port`: made by the controller
/// (a controller reference to `owner`) or only labelled alike.
pub async fn runtime_pod(
    ns: &TestNs,
    name: &str,
    rt: &str,
    ip: &str,
    api_port: u16,
    owner: Option<&Runtime>,
) -> Pod {
    let mut p = pod(name).runtime(rt).ns(&ns.name).no_lease().build();
    p.status = None;
    p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
        name: Some(kruntimes::api::RUNTIMED_API_PORT_NAME.into()),
        container_port: i32::from(api_port),
        ..Default::default()
    }]);
    if let Some(owner) = owner {
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "kruntimes.io/v1alpha1".into(),
            kind: "Runtime".into(),
            name: owner.name_any(),
            uid: owner.uid().unwrap(),
            controller: Some(true),
            ..Default::default()
        }]);
    }
    let created = create_in(ns, p).await;
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True"}]}});
    ns.api::<Pod>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    created
}

/// Waits until the API server reaches the gateway: the APIService Available, as `install`
/// judges it.
pub async fn await_available(client: &kube::Client) {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let apiservices: Api<APIService> = Api::all(client.clone());
    let name = kruntimes::manager::gateway::serving::APISERVICE;
    eventually(
        std::time::Duration::from_secs(60),
        "the gateway's APIService to be Available",
        async || {
            let s = apiservices.get(name).await.map_err(|e| e.to_string())?;
            kruntimes::cmd::install::system::gateway_available(&s)
        },
    )
    .await;
}
