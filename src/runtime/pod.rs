//! What kruntimes adds to a Runtime's Pod template so that a Pod of any image runs runtimed:
//! the binary (an init container from the kruntimes image copies it into an `emptyDir`), the
//! main container's command, the downward-API identity, a readiness probe on runtimed's own
//! state, and a termination grace period that leaves runtimed time to report. Pure: no client.
//!
//! The contract (also in docs/operations/runtime-pods.md, "Runtime Pods from any image"):
//! - the main container is the template's first container. Unless it already runs `runtimed`
//!   (an element of its `command` or `args` is `runtimed`), its command becomes
//!   `/kruntimes/kubectl-kruntimes runtimed` and its args are cleared; the rest (image, env,
//!   resources, volume mounts, security context) is kept. The binary is injected unless the
//!   template runs runtimed from its own image: a template may run
//!   `/kruntimes/kubectl-kruntimes runtimed --flags…` itself to pass runtimed flags;
//! - every container gets `POD_NAME`, `POD_NAMESPACE`, `POD_UID` from the downward API unless it
//!   sets them; the main container gets `KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS` and, unless the
//!   template passes `--shutdown-grace`, `KRUNTIMES_SHUTDOWN_GRACE`;
//! - the main container gets a readiness probe on runtimed's `/readyz` unless it has one: on
//!   the port the template's own `--health-probe-bind-address` (or the env) names, else 9442,
//!   and none when the template turns the probes off (`0`);
//! - `terminationGracePeriodSeconds` is kept and runtimed's shutdown grace derived from it, or
//!   raised when the template's own `--shutdown-grace` would outlive it;
//! - the main container gets the workspace volume at `/workspace` (the Runtime's
//!   `spec.workspace`, else an `emptyDir`) unless it mounts something there itself
//!   ([`with_workspace_volume`]);
//! - the container that runs runtimed gets the Runtime's filesystem artifact store (its
//!   `spec.artifactStore` claim) at `/var/lib/kruntimes/artifacts` ([`with_artifact_store`]);
//! - the annotation `kruntimes.io/inject: "false"` on the template keeps the Pod as written
//!   (identity env only): the image must then contain the binary and run runtimed itself;
//! - a template that follows the runtime-server contract (its first container is named
//!   `runtime`, serving gRPC on the Runtime's `spec.port`) keeps that container as written and
//!   gets runtimed as a sidecar instead ([`complete_with_server`]): a container `runtimed` of
//!   the Runtime's `daemonImage` (else the kruntimes image) running
//!   `runtimed --runtime-server 127.0.0.1:<port>` (env `KRUNTIMES_RUNTIME_SERVER`), with the
//!   identity, probe and grace settings above and the workspace volume at `/workspace` too.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSpec, Probe, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

mod artifacts;
mod injected;
mod state;
mod template;
mod workspace;

pub use artifacts::{ARTIFACT_MOUNT, ARTIFACT_VOLUME, ArtifactStore, with_artifact_store};
pub use injected::{
    DEFAULT_LIMITS, DEFAULT_REQUESTS, parse_resource_list, resource_requirements,
    restricted_security_context,
};
pub use state::{STATE_MOUNT, STATE_VOLUME, with_state_volume};
use template::{explicit_probe_port, explicit_shutdown_grace, runs_runtimed, uses_injected_binary};
pub use workspace::{
    ANNOTATION_WORKSPACE_SIZE_LIMIT, DEFAULT_WORKSPACE_SIZE_LIMIT, WORKSPACE_VOLUME,
    with_workspace_volume, workspace_size_limit,
};

/// Template annotation that turns the injection off (`"false"`).
pub const ANNOTATION_INJECT: &str = "kruntimes.io/inject";
/// The `emptyDir` that carries the binary, and where both containers mount it.
pub const BINARY_VOLUME: &str = "kruntimes-bin";
pub const BINARY_DIR: &str = "/kruntimes";
/// The injected binary, in [`BINARY_DIR`].
pub const INJECTED_BINARY: &str = "/kruntimes/kubectl-kruntimes";
/// The init container that copies the binary.
pub const INIT_CONTAINER: &str = "kruntimes-install";
/// Where the binary sits in the kruntimes image (`Dockerfile`).
pub const IMAGE_BINARY: &str = "/kubectl-kruntimes";
/// runtimed's `/healthz` and `/readyz` port in a Runtime Pod.
pub const PROBE_PORT: i32 = 9442;
/// runtimed's API port (TLS) in a Runtime Pod, named `kruntimes-api`.
pub const API_PORT: i32 = 9443;
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE: i64 = 30;
/// The part of the termination grace period kept for runtimed to kill what still runs and
/// report it (its own reap timeout is 5 s, then up to 3 s for its last Event writes, which
/// take milliseconds unless the API server is unreachable): 10 s, or half of a shorter period.
pub const REPORT_MARGIN: i64 = 10;
/// The shortest termination grace period a Runtime Pod gets (1 s to finish, 1 s to report).
pub const MIN_TERMINATION_GRACE: i64 = 2;

/// What the Runtime controller needs to know to complete a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    /// The kruntimes image (`scheduler run --runtime-image`).
    pub image: String,
    /// Requests and limits of the containers kruntimes adds (the init container and the
    /// runtimed sidecar; `scheduler run --runtimed-requests/--runtimed-limits`).
    pub resources: ResourceRequirements,
    /// `scheduler run --routine-events`: runtimed gets `KRUNTIMES_ROUTINE_EVENTS=true` when
    /// true (nothing when false, its default, so that Pods made before do not roll).
    pub routine_events: bool,
    /// `scheduler run --event-fold-window`: runtimed gets `KRUNTIMES_EVENT_FOLD_WINDOW` when
    /// it is not the default (so that Pods made before do not roll).
    pub event_fold_window: std::time::Duration,
    /// `scheduler run --claim-delay`: runtimed gets `KRUNTIMES_CLAIM_DELAY` when it is not the
    /// default (so that Pods made before do not roll).
    pub claim_delay: std::time::Duration,
    /// The gateway's account (`scheduler run --gateway-*`): runtimed gets
    /// `KRUNTIMES_GATEWAY_USER` when it is not the default.
    pub gateway_user: Option<String>,
}

impl Injection {
    /// `image`, with the default requests and limits ([`DEFAULT_REQUESTS`], [`DEFAULT_LIMITS`]).
    pub fn with_default_resources(image: &str) -> Self {
        let parse = |s| parse_resource_list(s).expect("the defaults parse");
        Injection {
            image: image.into(),
            resources: resource_requirements(parse(DEFAULT_REQUESTS), parse(DEFAULT_LIMITS)),
            routine_events: false,
            event_fold_window: crate::telemetry::events::FOLD_WINDOW,
            claim_delay: crate::api::default_claim_delay(),
            gateway_user: None,
        }
    }
}

/// The name of the first container of a template that follows the runtime-server contract.
pub const RUNTIME_CONTAINER: &str = "runtime";
/// The runtimed sidecar of such a template.
pub const SIDECAR_CONTAINER: &str = "runtimed";

/// The runtime server of a contract template: runtimed reaches it on the Pod's loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// The Runtime's `spec.port`.
    pub port: i32,
    /// The Runtime's `daemonImage`, if set: the sidecar's image.
    pub daemon_image: Option<String>,
}

/// Whether the template follows the runtime-server contract: its first container is named
/// `runtime` (and it has no `runtimed` container of its own).
pub fn follows_contract(spec: &PodSpec) -> bool {
    spec.containers
        .first()
        .is_some_and(|c| c.name == RUNTIME_CONTAINER)
        && !spec.containers.iter().any(|c| c.name == SIDECAR_CONTAINER)
}

/// [`complete`], with runtimed as a sidecar of the runtime server when the template follows
/// the contract ([`follows_contract`]) and the injection is on.
pub fn complete_with_server(
    mut spec: PodSpec,
    injection: &Injection,
    inject: bool,
    server: &Server,
) -> PodSpec {
    if !inject || !follows_contract(&spec) {
        return complete(spec, injection, inject);
    }
    let template_grace = spec
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_TERMINATION_GRACE);
    let (pod_grace, runtimed_grace) = grace_periods(template_grace, None);
    spec.termination_grace_period_seconds = Some(pod_grace);
    let image = server
        .daemon_image
        .clone()
        .unwrap_or_else(|| injection.image.clone());
    let mut sidecar = Container {
        name: SIDECAR_CONTAINER.into(),
        image: Some(image),
        command: Some(vec![IMAGE_BINARY.into(), "runtimed".into()]),
        readiness_probe: Some(readyz_probe(PROBE_PORT)),
        security_context: Some(restricted_security_context()),
        resources: Some(injection.resources.clone()),
        ..Default::default()
    };
    let env = sidecar.env.get_or_insert_with(Vec::new);
    set_env(
        env,
        "KRUNTIMES_RUNTIME_SERVER",
        &format!("127.0.0.1:{}", server.port),
    );
    set_runtimed(&mut sidecar, runtimed_grace, injection);
    spec.containers.push(sidecar);
    for container in &mut spec.containers {
        add_identity_env(container);
    }
    spec
}

/// Whether the template's metadata keeps the injection on (no `kruntimes.io/inject: "false"`).
pub fn injects(template: &ObjectMeta) -> bool {
    template
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_INJECT))
        .is_none_or(|v| v != "false")
}

/// Completes `spec` (a Runtime's `spec.template.spec`) into a Runtime Pod's spec. With
/// `inject == false` only the identity env is added.
pub fn complete(mut spec: PodSpec, injection: &Injection, inject: bool) -> PodSpec {
    for container in &mut spec.containers {
        add_identity_env(container);
    }
    if !inject || spec.containers.is_empty() {
        return spec;
    }
    let template_grace = spec
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_TERMINATION_GRACE);
    let main = &mut spec.containers[0];
    let runs_runtimed = runs_runtimed(main);
    let explicit_grace = explicit_shutdown_grace(main);
    let (pod_grace, runtimed_grace) = grace_periods(template_grace, explicit_grace);
    spec.termination_grace_period_seconds = Some(pod_grace);

    // The binary is injected unless the image brings it: the template does not run runtimed,
    // or runs it from the injected path (to pass runtimed flags on a plain image).
    let inject_binary = !runs_runtimed || uses_injected_binary(main);
    if !runs_runtimed {
        main.command = Some(vec![INJECTED_BINARY.into(), "runtimed".into()]);
        main.args = None;
    }
    if inject_binary {
        main.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: BINARY_VOLUME.into(),
                mount_path: BINARY_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            });
    }
    // runtimed serves its probes where the template says, else on PROBE_PORT.
    let probe_port = explicit_probe_port(main).unwrap_or(Some(PROBE_PORT));
    set_runtimed(main, runtimed_grace, injection);
    if main.readiness_probe.is_none()
        && let Some(port) = probe_port
    {
        main.readiness_probe = Some(readyz_probe(port));
    }

    if inject_binary {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: BINARY_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        });
        spec.init_containers
            .get_or_insert_with(Vec::new)
            .insert(0, install_container(injection));
    }
    spec
}

/// runtimed's own settings in the container that runs it: its probes on [`PROBE_PORT`], its
/// API on [`API_PORT`] (declared, named `kruntimes-api`, which the gateway calls), the
/// gateway's account when it is not the default and, unless the template passes one, the
/// shutdown grace derived from the Pod's.
fn set_runtimed(container: &mut Container, runtimed_grace: Option<i64>, injection: &Injection) {
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.container_port == API_PORT) {
        ports.push(ContainerPort {
            name: Some(crate::api::RUNTIMED_API_PORT_NAME.into()),
            container_port: API_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        });
    }
    let env = container.env.get_or_insert_with(Vec::new);
    set_env(env, "KRUNTIMES_API_BIND_ADDRESS", &format!(":{API_PORT}"));
    if let Some(user) = &injection.gateway_user
        && user != crate::api::DEFAULT_GATEWAY_USER
    {
        set_env(env, "KRUNTIMES_GATEWAY_USER", user);
    }
    if injection.routine_events {
        set_env(env, "KRUNTIMES_ROUTINE_EVENTS", "true");
    }
    if injection.event_fold_window != crate::telemetry::events::FOLD_WINDOW {
        let window = format!("{}s", injection.event_fold_window.as_secs_f64());
        set_env(env, "KRUNTIMES_EVENT_FOLD_WINDOW", &window);
    }
    if injection.claim_delay != crate::api::default_claim_delay() {
        let delay = format!("{}s", injection.claim_delay.as_secs_f64());
        set_env(env, "KRUNTIMES_CLAIM_DELAY", &delay);
    }
    set_env(
        env,
        "KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS",
        &format!(":{PROBE_PORT}"),
    );
    if let Some(grace) = runtimed_grace {
        set_env(env, "KRUNTIMES_SHUTDOWN_GRACE", &format!("{grace}s"));
    }
}

/// The readiness probe on runtimed's `/readyz`.
fn readyz_probe(port: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/readyz".into()),
            port: IntOrString::Int(port),
            ..Default::default()
        }),
        period_seconds: Some(2),
        failure_threshold: Some(2),
        ..Default::default()
    }
}

/// The init container that copies the binary out of the kruntimes image.
fn install_container(injection: &Injection) -> Container {
    Container {
        name: INIT_CONTAINER.into(),
        image: Some(injection.image.clone()),
        security_context: Some(restricted_security_context()),
        resources: Some(injection.resources.clone()),
        command: Some(vec![
            IMAGE_BINARY.into(),
            "copy-binary".into(),
            INJECTED_BINARY.into(),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: BINARY_VOLUME.into(),
            mount_path: BINARY_DIR.into(),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The Pod's `terminationGracePeriodSeconds` and runtimed's shutdown grace (`None`: the
/// template's own `--shutdown-grace` stands), such that runtimed always has time to report
/// before the kubelet's SIGKILL.
pub fn grace_periods(template: i64, explicit_runtimed: Option<i64>) -> (i64, Option<i64>) {
    match explicit_runtimed {
        Some(runtimed) => (template.max(runtimed + REPORT_MARGIN), None),
        None => {
            let pod = template.max(MIN_TERMINATION_GRACE);
            let margin = REPORT_MARGIN.min(pod / 2);
            (pod, Some(pod - margin))
        }
    }
}

/// Adds the downward-API identity (`POD_NAME`, `POD_NAMESPACE`, `POD_UID`) to the container,
/// unless it sets a variable itself.
fn add_identity_env(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    for (var, path) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
    ] {
        if !env.iter().any(|e| e.name == var) {
            env.push(EnvVar {
                name: var.into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: path.into(),
                        api_version: None,
                    }),
                    ..Default::default()
                }),
            });
        }
    }
}

/// The index of the container that runs runtimed: the sidecar `runtimed` when there is one
/// (never the first), else the main container; `None` for a spec without containers.
fn runtimed_container(spec: &PodSpec) -> Option<usize> {
    if spec.containers.is_empty() {
        return None;
    }
    Some(
        spec.containers
            .iter()
            .position(|c| c.name == SIDECAR_CONTAINER)
            .filter(|i| *i > 0)
            .unwrap_or(0),
    )
}

/// Sets `name` unless the template already sets it.
fn set_env(env: &mut Vec<EnvVar>, name: &str, value: &str) {
    if !env.iter().any(|e| e.name == name) {
        env.push(EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        });
    }
}

/// The plain value of `name` in `c`'s environment (for the tests of this module and its
/// submodules).
#[cfg(test)]
fn env_value(c: &Container, name: &str) -> Option<String> {
    c.env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

/// The kruntimes image of this version (as `Dockerfile` and deploy/ name it).
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/kruntimes/kubectl-kruntimes:",
    env!("CARGO_PKG_VERSION")
);

#[cfg(test)]
mod tests;
