//! What a Runtime's Pod template already says about runtimed: whether its main container runs
//! it (and from the injected binary), and the shutdown grace and probe address it passes on
//! the command line or in the env. [`super::complete`] keeps those instead of its own.

use k8s_openapi::api::core::v1::Container;

use super::BINARY_DIR;

/// Whether the container's command line already runs `runtimed` (the image contains the
/// binary, e.g. the kruntimes image itself with `args: ["runtimed"]`).
pub(super) fn runs_runtimed(container: &Container) -> bool {
    words(container).any(|word| word == "runtimed")
}

/// Whether the container's command line names the injected binary (`/kruntimes/…`).
pub(super) fn uses_injected_binary(container: &Container) -> bool {
    words(container).any(|word| {
        word.strip_prefix(BINARY_DIR)
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The container's command line: `command`, then `args`.
fn words(container: &Container) -> impl Iterator<Item = &String> {
    container
        .command
        .iter()
        .chain(container.args.iter())
        .flatten()
}

/// runtimed's shutdown grace set by the template (`--shutdown-grace` on the command line, else
/// `KRUNTIMES_SHUTDOWN_GRACE` in the env), in whole seconds rounded up.
pub(super) fn explicit_shutdown_grace(container: &Container) -> Option<i64> {
    let value = runtimed_setting(container, "--shutdown-grace", "KRUNTIMES_SHUTDOWN_GRACE")?;
    let d = crate::util::duration::parse_duration(&value).ok()?;
    Some(d.as_secs() as i64 + i64::from(d.subsec_nanos() > 0))
}

/// The port runtimed serves its probes on, when the template sets the address itself
/// (`--health-probe-bind-address` on the command line, else the env): `Some(None)` when it
/// turns them off (`0`) or the address does not parse (runtimed then refuses to start).
pub(super) fn explicit_probe_port(container: &Container) -> Option<Option<i32>> {
    let value = runtimed_setting(
        container,
        "--health-probe-bind-address",
        "KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS",
    )?;
    let addr = crate::telemetry::http::parse_bind(&value, "--health-probe-bind-address").ok()?;
    Some(addr.map(|a| i32::from(a.port())))
}

/// A runtimed setting as the template gives it: the `flag` on the command line (`--flag=v` or
/// `--flag v`), else the `env` variable's literal value (flags win, as in runtimed).
fn runtimed_setting(container: &Container, flag: &str, env: &str) -> Option<String> {
    let words: Vec<&String> = words(container).collect();
    let from_flag = words.iter().enumerate().find_map(|(i, w)| {
        if let Some(v) = w.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            Some(v.to_string())
        } else if w.as_str() == flag {
            words.get(i + 1).map(|v| v.to_string())
        } else {
            None
        }
    });
    from_flag.or_else(|| {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == env)
            .and_then(|e| e.value.clone())
    })
}
