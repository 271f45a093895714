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
    let completed = complete_with_server(spec(runtime.clone(), None), &injection(), true, &server);
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
    assert_eq!(env_value(sidecar, "KRUNTIMES_CLAIM_DELAY"), None);
    let told = Injection {
        routine_events: true,
        event_fold_window: std::time::Duration::from_micros(2500),
        // Not the default (500ms): claims written before tasks start.
        claim_delay: std::time::Duration::ZERO,
        ..injection()
    };
    let told = complete_with_server(spec(runtime.clone(), None), &told, true, &server);
    assert_eq!(
        env_value(&told.containers[1], "KRUNTIMES_ROUTINE_EVENTS").as_deref(),
        Some("true")
    );
    let delay = env_value(&told.containers[1], "KRUNTIMES_CLAIM_DELAY").unwrap();
    assert_eq!(
        crate::util::duration::parse_duration(&delay),
        Ok(std::time::Duration::ZERO)
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
