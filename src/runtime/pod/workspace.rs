//! The workspace volume of a Runtime Pod: where its PersistentWorkspaces live, mounted at
//! `/workspace` in the main container (and in a runtimed sidecar), from the Runtime's
//! `spec.workspace` or an `emptyDir` bounded by [`ANNOTATION_WORKSPACE_SIZE_LIMIT`] (tasks
//! write there: a task that fills it gets its Pod evicted, not its node's disk full).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The Runtime annotation that sets the `sizeLimit` of the injected workspace `emptyDir`.
pub const ANNOTATION_WORKSPACE_SIZE_LIMIT: &str = "kruntimes.io/workspace-size-limit";
/// Its default.
pub const DEFAULT_WORKSPACE_SIZE_LIMIT: &str = "10Gi";

/// The workspace `emptyDir`'s size limit a Runtime's `annotations` ask for, and what is wrong
/// with them (the default stands for a value that is not a quantity).
pub fn workspace_size_limit(annotations: &BTreeMap<String, String>) -> (Quantity, Option<String>) {
    let default = Quantity(DEFAULT_WORKSPACE_SIZE_LIMIT.into());
    let Some(value) = annotations.get(ANNOTATION_WORKSPACE_SIZE_LIMIT) else {
        return (default, None);
    };
    let value = value.trim();
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &value[digits.len()..];
    let number = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().filter(|c| *c == '.').count() <= 1
        && !digits.starts_with('.')
        && !digits.ends_with('.');
    let unit = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
    ];
    match number && unit.contains(&suffix) {
        true => (Quantity(value.to_string()), None),
        false => (
            default,
            Some(format!(
                "annotation {ANNOTATION_WORKSPACE_SIZE_LIMIT}={value:?} is not a quantity (e.g. 20Gi); the workspace emptyDir is limited to {DEFAULT_WORKSPACE_SIZE_LIMIT}"
            )),
        ),
    }
}

use super::SIDECAR_CONTAINER;

/// The volume a Runtime Pod's PersistentWorkspaces live on, mounted at
/// [`crate::api::WORKSPACE_MOUNT`] in the main container.
pub const WORKSPACE_VOLUME: &str = "kruntimes-workspace";

/// Mounts the Pod's workspace volume at `/workspace` in the main container, where runtimed
/// keeps its PersistentWorkspaces: the Runtime's `spec.workspace` (the fields of a core
/// `VolumeSource`), else an `emptyDir`, which outlives container restarts (an OOM kill of
/// runtimed does not empty a workspace) and ends with the Pod, as `RuntimePodLocal` says. A
/// template that mounts something at `/workspace` itself keeps it, and so does one that turns
/// the injection off. A `spec.workspace` that is not a volume source is `Err` with why; the
/// Pod then gets the `emptyDir`, of at most `size_limit`.
pub fn with_workspace_volume(
    mut spec: PodSpec,
    workspace: Option<&serde_json::Value>,
    size_limit: &Quantity,
    inject: bool,
) -> (PodSpec, Result<(), String>) {
    let Some(main) = spec.containers.first_mut().filter(|_| inject) else {
        return (spec, Ok(()));
    };
    let mounts = main.volume_mounts.get_or_insert_with(Vec::new);
    let own = mounts
        .iter()
        .find(|m| m.mount_path.trim_end_matches('/') == crate::api::WORKSPACE_MOUNT)
        .cloned();
    let mount = own.clone().unwrap_or_else(|| VolumeMount {
        name: WORKSPACE_VOLUME.into(),
        mount_path: crate::api::WORKSPACE_MOUNT.into(),
        ..Default::default()
    });
    if own.is_none() {
        mounts.push(mount.clone());
    }
    // A runtimed sidecar creates the workspace directories the runtime server's executions
    // run in: it sees the same volume at the same path.
    if let Some(sidecar) = spec
        .containers
        .iter_mut()
        .skip(1)
        .find(|c| c.name == SIDECAR_CONTAINER)
    {
        sidecar
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(mount);
    }
    if own.is_some() {
        return (spec, Ok(()));
    }
    let empty_dir = Volume {
        name: WORKSPACE_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(size_limit.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (volume, checked) = match workspace {
        None => (empty_dir, Ok(())),
        Some(source) => {
            let mut fields = source.as_object().cloned().unwrap_or_default();
            fields.insert("name".into(), WORKSPACE_VOLUME.into());
            match serde_json::from_value::<Volume>(serde_json::Value::Object(fields)) {
                Ok(volume) => (volume, Ok(())),
                Err(e) => (
                    empty_dir,
                    Err(format!(
                        "spec.workspace is not a volume source ({e}); the Runtime Pod's workspace is an emptyDir"
                    )),
                ),
            }
        }
    };
    spec.volumes.get_or_insert_with(Vec::new).push(volume);
    (spec, checked)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::*;

    fn main_only() -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "main".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_workspace_volume_is_an_empty_dir_or_the_runtimes_and_mounted_at_workspace() {
        let (spec, ok) = with_workspace_volume(main_only(), None, &limit(), true);
        assert_eq!(ok, Ok(()));
        let mount = &spec.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (mount.name.as_str(), mount.mount_path.as_str()),
            (WORKSPACE_VOLUME, "/workspace")
        );
        let volume = &spec.volumes.as_ref().unwrap()[0];
        let size = volume.empty_dir.as_ref().unwrap().size_limit.clone();
        assert_eq!(size, Some(limit()));

        let pvc = serde_json::json!({"persistentVolumeClaim": {"claimName": "data"}});
        let (spec, ok) = with_workspace_volume(main_only(), Some(&pvc), &limit(), true);
        assert_eq!(ok, Ok(()));
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(volume.name, WORKSPACE_VOLUME);
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            "data"
        );

        let bad = serde_json::json!({"emptyDir": "big"});
        let (spec, err) = with_workspace_volume(main_only(), Some(&bad), &limit(), true);
        assert!(
            err.unwrap_err()
                .starts_with("spec.workspace is not a volume source")
        );
        assert!(spec.volumes.as_ref().unwrap()[0].empty_dir.is_some());
    }

    fn limit() -> Quantity {
        Quantity(DEFAULT_WORKSPACE_SIZE_LIMIT.into())
    }

    #[test]
    fn the_size_limit_is_the_annotations_quantity_or_the_default_with_why() {
        let of = |v: &str| {
            let annotations = [(ANNOTATION_WORKSPACE_SIZE_LIMIT.to_string(), v.to_string())];
            workspace_size_limit(&annotations.into())
        };
        assert_eq!(workspace_size_limit(&BTreeMap::new()), (limit(), None));
        for ok in ["20Gi", "500Mi", "1.5G", "1000000"] {
            assert_eq!(of(ok), (Quantity(ok.into()), None), "{ok}");
        }
        for bad in ["", "big", "10GB", "-1Gi", ".5Gi", "1..2Gi"] {
            let (q, why) = of(bad);
            assert_eq!(q, limit(), "{bad}");
            assert!(
                why.unwrap().contains(ANNOTATION_WORKSPACE_SIZE_LIMIT),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_template_that_mounts_workspace_itself_or_opts_out_is_kept() {
        let mut own = main_only();
        own.containers[0].volume_mounts = Some(vec![VolumeMount {
            name: "mine".into(),
            mount_path: "/workspace/".into(),
            ..Default::default()
        }]);
        let (spec, _) = with_workspace_volume(own.clone(), None, &limit(), true);
        assert_eq!(spec, own);
        let (spec, _) = with_workspace_volume(main_only(), None, &limit(), false);
        assert_eq!(spec, main_only());
    }
}
