//! The NetworkPolicy of a Runtime's Pods: ingress only to the ports that are meant to be
//! reached, so the runtime server's gRPC port (`spec.port`, which has no authentication of
//! its own and only runtimed on the Pod's loopback needs) and any port the template does not
//! declare are closed to other Pods. Open: runtimed's probe port (the kubelet's probes),
//! runtimed's API port (TLS, declared by the Pod builder; it answers the gateway only,
//! runtimed's `callers`), every port a container of the template declares
//! (`ports[].containerPort`, the runtime server's excepted), and the ports the probes use.
//!
//! Enforced by the cluster's network plugin (Calico, Cilium, …); one without NetworkPolicy
//! support ignores it. Pure: the Runtime controller applies it, owned by the Runtime.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PodSpec, Probe};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::api::{LABEL_RUNTIME, Runtime};

/// The policy's name for `runtime`.
pub fn name(runtime: &str) -> String {
    format!("kubectl-kruntimes-{runtime}")
}

/// The ports of a completed Runtime Pod spec that other Pods may reach: runtimed's probe port,
/// the template's declared ports but the runtime server's (`server_port`), and the probes'.
pub fn open_ports(spec: &PodSpec, server_port: Option<i32>) -> BTreeSet<i32> {
    let mut ports = BTreeSet::from([crate::runtime::pod::PROBE_PORT]);
    let probe_port = |p: &Option<Probe>| match p.as_ref()?.http_get.as_ref()?.port {
        IntOrString::Int(port) => Some(port),
        IntOrString::String(_) => None,
    };
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            if Some(p.container_port) != server_port {
                ports.insert(p.container_port);
            }
        }
        for probe in [&c.readiness_probe, &c.liveness_probe, &c.startup_probe] {
            ports.extend(probe_port(probe));
        }
    }
    ports
}

/// The NetworkPolicy for `runtime`'s Pods, whose completed spec is `spec`.
pub fn policy(runtime: &Runtime, spec: &PodSpec, server_port: Option<i32>) -> NetworkPolicy {
    let selector = BTreeMap::from([(LABEL_RUNTIME.to_string(), runtime.name_any())]);
    NetworkPolicy {
        metadata: crate::runtime::identity::owned_by(runtime, &name(&runtime.name_any())),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: None,
                ports: Some(
                    open_ports(spec, server_port)
                        .into_iter()
                        .map(|port| NetworkPolicyPort {
                            port: Some(IntOrString::Int(port)),
                            protocol: Some("TCP".into()),
                            end_port: None,
                        })
                        .collect(),
                ),
            }]),
            egress: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort};

    fn port(n: i32) -> ContainerPort {
        ContainerPort {
            container_port: n,
            ..Default::default()
        }
    }

    #[test]
    fn the_runtime_servers_port_is_closed_and_declared_ports_stay_open() {
        let spec = PodSpec {
            containers: vec![
                Container {
                    name: "runtime".into(),
                    ports: Some(vec![port(9091), port(8888)]),
                    ..Default::default()
                },
                Container {
                    name: "runtimed".into(),
                    readiness_probe: Some(Probe {
                        http_get: Some(k8s_openapi::api::core::v1::HTTPGetAction {
                            port: IntOrString::Int(9442),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(open_ports(&spec, Some(9091)), BTreeSet::from([8888, 9442]));
        let mut rt = crate::testing::runtime("nb").build();
        rt.metadata.namespace = Some("team-a".into());
        rt.metadata.uid = Some("u1".into());
        let p = policy(&rt, &spec, Some(9091));
        assert_eq!(p.name_any(), "kubectl-kruntimes-nb");
        assert_eq!(p.owner_references()[0].uid, "u1");
        let spec = p.spec.unwrap();
        assert_eq!(
            spec.pod_selector.unwrap().match_labels.unwrap()[LABEL_RUNTIME],
            "nb"
        );
        assert_eq!(spec.policy_types.unwrap(), ["Ingress"]);
        let rule = &spec.ingress.unwrap()[0];
        assert!(rule.from.is_none(), "from anywhere, on those ports only");
        let ports: Vec<IntOrString> = rule
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.port.clone())
            .collect();
        assert_eq!(ports, [IntOrString::Int(8888), IntOrString::Int(9442)]);
    }
}
