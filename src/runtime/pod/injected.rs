//! What the containers kruntimes adds to a Runtime Pod (the init container that copies the
//! binary, the runtimed sidecar) are allowed and given: a restricted security context, and
//! requests and limits, so that a Runtime whose own containers comply runs in a namespace that
//! enforces Pod Security `restricted` and under a compute ResourceQuota. Pure. The template's
//! own containers are the user's and are kept as written.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ResourceRequirements, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `scheduler run --runtimed-requests`'s default.
pub const DEFAULT_REQUESTS: &str = "cpu=50m,memory=64Mi";
/// `scheduler run --runtimed-limits`'s default: runtimed stages artifacts and fetches Git
/// sources in memory-bounded steps, well under this, and writes nothing to its own container's
/// file system but what the container runtime keeps of its output.
pub const DEFAULT_LIMITS: &str = "cpu=1,memory=512Mi,ephemeral-storage=1Gi";

/// The resources a request or limit may name.
const RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// The security context of the containers kruntimes adds: Pod Security `restricted` (non-root,
/// no privilege escalation, every capability dropped, the runtime's default seccomp profile)
/// and a read-only root filesystem (runtimed writes only to its volumes). The user is the
/// image's (the kruntimes image runs as 65532); a `daemonImage` that runs as root is refused
/// by the kubelet, and the Runtime says so (`ReplicaFailure`).
pub fn restricted_security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        read_only_root_filesystem: Some(true),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    }
}

/// Requests and limits as a container's `resources` (an empty list is left unset).
pub fn resource_requirements(
    requests: BTreeMap<String, Quantity>,
    limits: BTreeMap<String, Quantity>,
) -> ResourceRequirements {
    ResourceRequirements {
        requests: (!requests.is_empty()).then_some(requests),
        limits: (!limits.is_empty()).then_some(limits),
        ..Default::default()
    }
}

/// `cpu=50m,memory=64Mi` (kubectl set resources' form) as a resource list; `""` is none.
pub fn parse_resource_list(s: &str) -> Result<BTreeMap<String, Quantity>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!(
                "{pair:?} is not NAME=QUANTITY; write e.g. cpu=50m,memory=64Mi"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if !RESOURCES.contains(&name) {
            return Err(format!(
                "{name:?} is not a resource of a container; use {}",
                RESOURCES.join(", ")
            ));
        }
        if !is_quantity(value) {
            return Err(format!(
                "{value:?} is not a quantity for {name}; write e.g. 500m, 1, 64Mi or 1Gi"
            ));
        }
        if out
            .insert(name.to_string(), Quantity(value.to_string()))
            .is_some()
        {
            return Err(format!("{name} is given twice"));
        }
    }
    Ok(out)
}

/// Kubernetes' quantity syntax: a non-negative decimal and an optional suffix (binary `Ki`…`Ei`,
/// decimal `m`, `k`, `M`…`E`, or an exponent `e3`).
fn is_quantity(s: &str) -> bool {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let digits = number.replace('.', "");
    let valid_number = !digits.is_empty() && number.matches('.').count() <= 1;
    let valid_suffix = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit()));
    valid_number && valid_suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_and_kubectls_form_parse() {
        let requests = parse_resource_list(DEFAULT_REQUESTS).unwrap();
        assert_eq!(requests["cpu"], Quantity("50m".into()));
        assert_eq!(requests["memory"], Quantity("64Mi".into()));
        let limits = parse_resource_list("cpu=1.5, memory=1Gi,ephemeral-storage=2e9").unwrap();
        assert_eq!(limits.len(), 3);
        assert!(parse_resource_list("").unwrap().is_empty());
        let none = resource_requirements(BTreeMap::new(), limits);
        assert!(none.requests.is_none() && none.limits.is_some());
    }

    #[test]
    fn bad_lists_name_what_is_wrong() {
        for (input, says) in [
            ("cpu", "is not NAME=QUANTITY"),
            ("gpu=1", "\"gpu\" is not a resource of a container"),
            ("memory=lots", "\"lots\" is not a quantity for memory"),
            ("memory=64MB", "\"64MB\" is not a quantity"),
            ("cpu=1,cpu=2", "cpu is given twice"),
            ("cpu=-1", "is not a quantity"),
            ("cpu=1.2.3", "is not a quantity"),
        ] {
            let err = parse_resource_list(input).unwrap_err();
            assert!(err.contains(says), "{input}: {err}");
        }
    }

    #[test]
    fn the_security_context_meets_pod_security_restricted() {
        let c = restricted_security_context();
        assert_eq!(c.run_as_non_root, Some(true));
        assert_eq!(c.allow_privilege_escalation, Some(false));
        assert_eq!(c.read_only_root_filesystem, Some(true));
        assert_eq!(c.capabilities.unwrap().drop.unwrap(), ["ALL"]);
        assert_eq!(c.seccomp_profile.unwrap().type_, "RuntimeDefault");
    }
}
