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
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector,
    PodSpec, Probe, ResourceRequirements, Volume, VolumeMount,
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
    set_runtimed_env(env, runtimed_grace, injection);
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
    set_runtimed_env(
        main.env.get_or_insert_with(Vec::new),
        runtimed_grace,
        injection,
    );
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

/// runtimed's own settings in the container that runs it: its probes on [`PROBE_PORT`] and,
/// unless the template passes one, the shutdown grace derived from the Pod's.
fn set_runtimed_env(env: &mut Vec<EnvVar>, runtimed_grace: Option<i64>, injection: &Injection) {
    if injection.routine_events {
        set_env(env, "KRUNTIMES_ROUTINE_EVENTS", "true");
    }
    if injection.event_fold_window != crate::telemetry::events::FOLD_WINDOW {
        let window = format!("{}s", injection.event_fold_window.as_secs_f64());
        set_env(env, "KRUNTIMES_EVENT_FOLD_WINDOW", &window);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, command: &[&str], args: &[&str]) -> Container {
        let words = |w: &[&str]| (!w.is_empty()).then(|| w.iter().map(|s| s.to_string()).collect());
        Container {
            name: "main".into(),
            image: Some(image.into()),
            command: words(command),
            args: words(args),
            ..Default::default()
        }
    }

    fn spec(main: Container, grace: Option<i64>) -> PodSpec {
        PodSpec {
            containers: vec![main],
            termination_grace_period_seconds: grace,
            ..Default::default()
        }
    }

    fn injection() -> Injection {
        Injection::with_default_resources("kubectl-kruntimes:0.1.0")
    }

    #[test]
    fn a_plain_image_gets_the_binary_from_an_init_container_and_runs_runtimed_from_it() {
        let out = complete(
            spec(container("python:3.12", &[], &[]), None),
            &injection(),
            true,
        );
        let init = &out.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.name, INIT_CONTAINER);
        assert_eq!(init.image.as_deref(), Some("kubectl-kruntimes:0.1.0"));
        assert_eq!(
            init.command.as_ref().unwrap(),
            &[
                "/kubectl-kruntimes",
                "copy-binary",
                "/kruntimes/kubectl-kruntimes"
            ]
        );
        // What kruntimes adds is restricted and bounded; the user's container is theirs.
        assert_eq!(init.security_context, Some(restricted_security_context()));
        assert_eq!(init.resources, Some(injection().resources));
        let main = &out.containers[0];
        assert_eq!(main.security_context, None);
        assert_eq!(main.resources, None);
        assert_eq!(main.image.as_deref(), Some("python:3.12"));
        assert_eq!(
            main.command.as_ref().unwrap(),
            &["/kruntimes/kubectl-kruntimes", "runtimed"]
        );
        assert_eq!(main.args, None);
        let mount = &main.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (mount.name.as_str(), mount.mount_path.as_str()),
            (BINARY_VOLUME, BINARY_DIR)
        );
        let volume = &out.volumes.as_ref().unwrap()[0];
        assert!(volume.name == BINARY_VOLUME && volume.empty_dir.is_some());
        let probe = main.readiness_probe.as_ref().unwrap().http_get.as_ref();
        assert_eq!(probe.unwrap().port, IntOrString::Int(PROBE_PORT));
        assert_eq!(
            env_value(main, "KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS").as_deref(),
            Some(":9442")
        );
        assert_eq!(out.termination_grace_period_seconds, Some(30));
        assert_eq!(
            env_value(main, "KRUNTIMES_SHUTDOWN_GRACE").as_deref(),
            Some("20s")
        );
    }

    #[test]
    fn a_template_that_runs_runtimed_keeps_its_command_and_gets_no_init_container() {
        let out = complete(
            spec(
                container("kubectl-kruntimes:0.1.0", &[], &["runtimed"]),
                None,
            ),
            &injection(),
            true,
        );
        assert_eq!(out.init_containers, None);
        assert_eq!(out.volumes, None);
        let main = &out.containers[0];
        assert_eq!(main.command, None);
        assert_eq!(main.args.as_ref().unwrap(), &["runtimed"]);
        assert!(main.readiness_probe.is_some());
    }

    #[test]
    fn a_template_that_runs_the_injected_binary_with_flags_keeps_them_and_gets_the_binary() {
        let main = container(
            "busybox",
            &[
                "/kruntimes/kubectl-kruntimes",
                "runtimed",
                "--heartbeat-interval=2s",
            ],
            &[],
        );
        let out = complete(spec(main, None), &injection(), true);
        assert_eq!(
            out.init_containers.as_ref().unwrap()[0].name,
            INIT_CONTAINER
        );
        let main = &out.containers[0];
        assert_eq!(main.command.as_ref().unwrap()[2], "--heartbeat-interval=2s");
        assert_eq!(
            main.volume_mounts.as_ref().unwrap()[0].mount_path,
            BINARY_DIR
        );
    }

    #[test]
    fn a_short_termination_grace_gives_runtimed_half_to_finish_and_half_to_report() {
        // The failure: runtimed's 25 s default outlived a 10 s Pod grace period.
        let out = complete(
            spec(container("busybox", &[], &[]), Some(10)),
            &injection(),
            true,
        );
        assert_eq!(out.termination_grace_period_seconds, Some(10));
        assert_eq!(
            env_value(&out.containers[0], "KRUNTIMES_SHUTDOWN_GRACE").as_deref(),
            Some("5s")
        );
    }

    #[test]
    fn an_explicit_shutdown_grace_raises_the_termination_grace_period() {
        let main = container(
            "kubectl-kruntimes:0.1.0",
            &[],
            &["runtimed", "--shutdown-grace", "25s"],
        );
        let out = complete(spec(main, Some(10)), &injection(), true);
        assert_eq!(out.termination_grace_period_seconds, Some(35));
        assert_eq!(
            env_value(&out.containers[0], "KRUNTIMES_SHUTDOWN_GRACE"),
            None
        );
    }

    #[test]
    fn grace_periods_always_leave_time_to_report() {
        for (template, explicit, pod, runtimed) in [
            (30, None, 30, Some(20)),
            (120, None, 120, Some(110)),
            (10, None, 10, Some(5)),
            (0, None, 2, Some(1)),
            (10, Some(25), 35, None),
            (60, Some(25), 60, None),
        ] {
            assert_eq!(
                grace_periods(template, explicit),
                (pod, runtimed),
                "template {template}, --shutdown-grace {explicit:?}"
            );
            let runtimed = runtimed.or(explicit).unwrap();
            assert!(pod - runtimed >= 1, "{pod} vs {runtimed}");
        }
    }

    #[test]
    fn template_settings_win_over_injected_ones() {
        let mut main = container("busybox", &[], &[]);
        main.env = Some(vec![EnvVar {
            name: "KRUNTIMES_SHUTDOWN_GRACE".into(),
            value: Some("3s".into()),
            value_from: None,
        }]);
        main.readiness_probe = Some(Probe {
            period_seconds: Some(7),
            ..Default::default()
        });
        let out = complete(spec(main, None), &injection(), true);
        let main = &out.containers[0];
        assert_eq!(
            env_value(main, "KRUNTIMES_SHUTDOWN_GRACE").as_deref(),
            Some("3s")
        );
        assert_eq!(
            main.readiness_probe.as_ref().unwrap().period_seconds,
            Some(7)
        );
    }

    #[test]
    fn the_readiness_probe_follows_the_templates_own_probe_address() {
        let probe_port = |command: &[&str], env: Option<&str>| {
            let mut main = container("my-image", command, &[]);
            main.env = env.map(|v| {
                vec![EnvVar {
                    name: "KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS".into(),
                    value: Some(v.into()),
                    value_from: None,
                }]
            });
            let out = complete(spec(main, None), &injection(), true);
            out.containers[0]
                .readiness_probe
                .as_ref()
                .map(|p| p.http_get.as_ref().unwrap().port.clone())
        };
        let runtimed = |flags: &[&'static str]| {
            let mut words = vec![INJECTED_BINARY, "runtimed"];
            words.extend_from_slice(flags);
            words
        };
        assert_eq!(probe_port(&[], None), Some(IntOrString::Int(PROBE_PORT)));
        let flagged = runtimed(&["--health-probe-bind-address=:9000"]);
        assert_eq!(probe_port(&flagged, None), Some(IntOrString::Int(9000)));
        let split = runtimed(&["--health-probe-bind-address", "127.0.0.1:9001"]);
        assert_eq!(probe_port(&split, None), Some(IntOrString::Int(9001)));
        assert_eq!(probe_port(&[], Some(":9002")), Some(IntOrString::Int(9002)));
        // The flag wins over the env, as in runtimed.
        assert_eq!(
            probe_port(&flagged, Some(":9002")),
            Some(IntOrString::Int(9000))
        );
        // Probes turned off: no readiness probe to fail forever.
        let off = runtimed(&["--health-probe-bind-address=0"]);
        assert_eq!(probe_port(&off, None), None);
    }

    #[test]
    fn opting_out_keeps_the_pod_as_written_with_the_identity_env() {
        let out = complete(
            spec(container("my-image", &["/bin/agent"], &[]), Some(10)),
            &injection(),
            false,
        );
        assert_eq!(out.init_containers, None);
        assert_eq!(out.termination_grace_period_seconds, Some(10));
        let main = &out.containers[0];
        assert_eq!(main.command.as_ref().unwrap(), &["/bin/agent"]);
        assert!(main.readiness_probe.is_none());
        let names: Vec<_> = main
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(names, ["POD_NAME", "POD_NAMESPACE", "POD_UID"]);
    }

    #[test]
    fn a_runtime_server_template_keeps_its_container_and_gets_runtimed_as_a_sidecar() {
        let mut runtime = container("ghcr.io/kruntimes/bash-runtime:1", &[], &[]);
        runtime.name = RUNTIME_CONTAINER.into();
        let server = Server {
            port: 9091,
            daemon_image: None,
        };
        let completed =
            complete_with_server(spec(runtime.clone(), None), &injection(), true, &server);
        let limit = workspace_size_limit(&Default::default()).0;
        let (completed, checked) = with_workspace_volume(completed, None, &limit, true);
        assert!(checked.is_ok());
        let [main, sidecar] = &completed.containers[..] else {
            panic!(
                "the runtime container and the sidecar: {:?}",
                completed.containers
            );
        };
        // The runtime server runs as written (plus identity and the workspace).
        assert_eq!((main.command.clone(), main.args.clone()), (None, None));
        assert_eq!(main.image, runtime.image);
        assert!(main.readiness_probe.is_none());
        assert_eq!(
            env_value(main, "POD_NAME"),
            None,
            "a downward-API value, not a literal"
        );
        assert!(
            main.env
                .as_ref()
                .unwrap()
                .iter()
                .any(|e| e.name == "POD_UID")
        );
        // runtimed drives it on the Pod's loopback, from the kruntimes image.
        assert_eq!(sidecar.name, SIDECAR_CONTAINER);
        assert_eq!(sidecar.image.as_deref(), Some("kubectl-kruntimes:0.1.0"));
        assert_eq!(
            sidecar.security_context,
            Some(restricted_security_context())
        );
        let resources = sidecar.resources.clone().unwrap();
        assert_eq!(resources.requests.unwrap()["memory"].0, "64Mi");
        assert_eq!(resources.limits.unwrap()["cpu"].0, "1");
        assert_eq!(main.security_context, None);
        assert_eq!(env_value(sidecar, "KRUNTIMES_ROUTINE_EVENTS"), None);
        assert_eq!(env_value(sidecar, "KRUNTIMES_EVENT_FOLD_WINDOW"), None);
        let told = Injection {
            routine_events: true,
            event_fold_window: std::time::Duration::from_micros(2500),
            ..injection()
        };
        let told = complete_with_server(spec(runtime.clone(), None), &told, true, &server);
        assert_eq!(
            env_value(&told.containers[1], "KRUNTIMES_ROUTINE_EVENTS").as_deref(),
            Some("true")
        );
        let window = env_value(&told.containers[1], "KRUNTIMES_EVENT_FOLD_WINDOW").unwrap();
        assert_eq!(
            crate::util::duration::parse_duration(&window),
            Ok(std::time::Duration::from_micros(2500))
        );
        assert_eq!(
            sidecar.command.as_deref(),
            Some(&[IMAGE_BINARY.to_string(), "runtimed".to_string()][..])
        );
        assert_eq!(
            env_value(sidecar, "KRUNTIMES_RUNTIME_SERVER").as_deref(),
            Some("127.0.0.1:9091")
        );
        assert!(sidecar.readiness_probe.is_some());
        assert!(
            sidecar
                .env
                .as_ref()
                .unwrap()
                .iter()
                .any(|e| e.name == "POD_UID")
        );
        // Both see the workspace volume at /workspace; no binary is copied.
        for c in [main, sidecar] {
            let mounts = c.volume_mounts.as_ref().unwrap();
            assert!(
                mounts
                    .iter()
                    .any(|m| m.name == WORKSPACE_VOLUME && m.mount_path == "/workspace")
            );
        }
        assert!(completed.init_containers.is_none());

        // daemonImage wins; a template whose first container is not `runtime` is injected as before.
        let custom = Server {
            port: 7000,
            daemon_image: Some("registry.example/runtimed:2".into()),
        };
        let completed = complete_with_server(spec(runtime, None), &injection(), true, &custom);
        assert_eq!(
            completed.containers[1].image.as_deref(),
            Some("registry.example/runtimed:2")
        );
        let plain = spec(container("busybox", &[], &[]), None);
        assert_eq!(
            complete_with_server(plain.clone(), &injection(), true, &custom),
            complete(plain, &injection(), true)
        );
    }
}
