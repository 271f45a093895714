//! runtimed's own volume in a Runtime Pod: an `emptyDir` mounted at [`STATE_MOUNT`] in the
//! container that runs runtimed, and in no other, where runtimed keeps what it writes itself
//! (the Runs' logs and their end markers, the staged copies of S3 artifacts), told with
//! `KRUNTIMES_STATE_DIR`. Never on the workspace, which every task writes: a task in the
//! `runtime` container cannot reach these files at all; one run by runtimed itself shares its
//! container, and the docs say what that means. Its size is bounded by runtimed's own bounds
//! (logs kept, one staged artifact at a time), so it has no `sizeLimit`. Pure.

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, Volume, VolumeMount};

use super::{runtimed_container, set_env};

/// The volume.
pub const STATE_VOLUME: &str = "kruntimes-runtimed";
/// Where runtimed sees it (`--state-dir`).
pub const STATE_MOUNT: &str = "/var/lib/kruntimes/runtimed";

/// Gives the container that runs runtimed its own volume. Nothing without injection, or when
/// the template mounts something there itself.
pub fn with_state_volume(mut spec: PodSpec, inject: bool) -> PodSpec {
    let Some(index) = runtimed_container(&spec).filter(|_| inject) else {
        return spec;
    };
    let runtimed = &mut spec.containers[index];
    let mounts = runtimed.volume_mounts.get_or_insert_with(Vec::new);
    if mounts.iter().any(|m| m.mount_path == STATE_MOUNT) {
        return spec;
    }
    mounts.push(VolumeMount {
        name: STATE_VOLUME.into(),
        mount_path: STATE_MOUNT.into(),
        ..Default::default()
    });
    set_env(
        runtimed.env.get_or_insert_with(Vec::new),
        "KRUNTIMES_STATE_DIR",
        STATE_MOUNT,
    );
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: STATE_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    spec
}

#[cfg(test)]
mod tests {
    use super::super::{SIDECAR_CONTAINER, env_value as env};
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    fn named(name: &str) -> Container {
        Container {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn runtimeds_volume_is_mounted_in_its_container_alone() {
        let spec = PodSpec {
            containers: vec![named("runtime"), named(SIDECAR_CONTAINER)],
            ..Default::default()
        };
        let spec = with_state_volume(spec, true);
        let sidecar = &spec.containers[1];
        assert_eq!(
            env(sidecar, "KRUNTIMES_STATE_DIR").as_deref(),
            Some(STATE_MOUNT)
        );
        let mount = &sidecar.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (mount.name.as_str(), mount.mount_path.as_str()),
            (STATE_VOLUME, STATE_MOUNT)
        );
        assert!(
            spec.containers[0].volume_mounts.is_none(),
            "the runtime container does not mount runtimed's files"
        );
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(volume.name, STATE_VOLUME);
        assert!(volume.empty_dir.is_some());

        // Without a sidecar, the main container runs runtimed; without injection, nothing.
        let main = with_state_volume(
            PodSpec {
                containers: vec![named("main")],
                ..Default::default()
            },
            true,
        );
        assert_eq!(
            env(&main.containers[0], "KRUNTIMES_STATE_DIR").as_deref(),
            Some(STATE_MOUNT)
        );
        let off = with_state_volume(
            PodSpec {
                containers: vec![named("main")],
                ..Default::default()
            },
            false,
        );
        assert!(off.volumes.is_none() && off.containers[0].env.is_none());
    }
}
