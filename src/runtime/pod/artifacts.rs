//! The artifact store of a Runtime Pod: the Runtime's `spec.artifactStore`, driver
//! `filesystem`, is its PersistentVolumeClaim mounted in the container that runs runtimed at
//! [`ARTIFACT_MOUNT`], which runtimed is told with `KRUNTIMES_ARTIFACT_ROOT` and
//! `KRUNTIMES_ARTIFACT_VOLUME_CLAIM`. Another driver is passed on as
//! `KRUNTIMES_ARTIFACT_DRIVER`, so that runtimed refuses a Run's artifacts with a clear reason
//! instead of dropping them. Pure.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, PersistentVolumeClaimVolumeSource, PodSpec, Volume, VolumeMount,
};

use super::SIDECAR_CONTAINER;

/// The volume of the filesystem artifact store.
pub const ARTIFACT_VOLUME: &str = "kruntimes-artifacts";
/// Where runtimed sees it.
pub const ARTIFACT_MOUNT: &str = "/var/lib/kruntimes/artifacts";

/// What a Runtime's `spec.artifactStore` asks of its Pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactStore {
    /// `driver: filesystem` with its claim.
    Filesystem { volume_claim: String },
    /// Any other driver (`s3`): runtimed is told, and refuses artifacts it cannot store.
    Other { driver: String },
}

impl ArtifactStore {
    /// The store `spec.artifactStore` describes, or why it describes none.
    pub fn of(spec: &serde_json::Value) -> Result<Self, String> {
        let driver = spec["driver"].as_str().unwrap_or_default();
        match driver {
            "filesystem" => spec["filesystem"]["volumeClaimName"]
                .as_str()
                .filter(|c| !c.is_empty())
                .map(|c| ArtifactStore::Filesystem {
                    volume_claim: c.to_string(),
                })
                .ok_or_else(|| {
                    "spec.artifactStore.filesystem.volumeClaimName is required with driver filesystem".to_string()
                }),
            "" => Err("spec.artifactStore.driver is required (filesystem or s3)".into()),
            other => Ok(ArtifactStore::Other {
                driver: other.to_string(),
            }),
        }
    }
}

/// Gives the container that runs runtimed (the sidecar `runtimed` when there is one, else the
/// main container) the artifact store of `store`. Nothing without injection.
pub fn with_artifact_store(mut spec: PodSpec, store: &ArtifactStore, inject: bool) -> PodSpec {
    if !inject || spec.containers.is_empty() {
        return spec;
    }
    let index = spec
        .containers
        .iter()
        .position(|c| c.name == SIDECAR_CONTAINER)
        .filter(|i| *i > 0)
        .unwrap_or(0);
    let runtimed: &mut Container = &mut spec.containers[index];
    let env = runtimed.env.get_or_insert_with(Vec::new);
    let mut set = |name: &str, value: &str| {
        if !env.iter().any(|e| e.name == name) {
            env.push(EnvVar {
                name: name.into(),
                value: Some(value.into()),
                value_from: None,
            });
        }
    };
    match store {
        ArtifactStore::Other { driver } => set("KRUNTIMES_ARTIFACT_DRIVER", driver),
        ArtifactStore::Filesystem { volume_claim } => {
            set("KRUNTIMES_ARTIFACT_ROOT", ARTIFACT_MOUNT);
            set("KRUNTIMES_ARTIFACT_VOLUME_CLAIM", volume_claim);
            runtimed
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: ARTIFACT_VOLUME.into(),
                    mount_path: ARTIFACT_MOUNT.into(),
                    ..Default::default()
                });
            spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: ARTIFACT_VOLUME.into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: volume_claim.clone(),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::super::env_value as env;
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    #[test]
    fn a_filesystem_store_is_its_claim_mounted_where_runtimed_runs() {
        let store = ArtifactStore::of(
            &serde_json::json!({"driver": "filesystem", "filesystem": {"volumeClaimName": "arts"}}),
        )
        .unwrap();
        let spec = PodSpec {
            containers: vec![
                Container {
                    name: "runtime".into(),
                    ..Default::default()
                },
                Container {
                    name: SIDECAR_CONTAINER.into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let spec = with_artifact_store(spec, &store, true);
        let sidecar = &spec.containers[1];
        assert_eq!(
            env(sidecar, "KRUNTIMES_ARTIFACT_ROOT").as_deref(),
            Some(ARTIFACT_MOUNT)
        );
        assert_eq!(
            env(sidecar, "KRUNTIMES_ARTIFACT_VOLUME_CLAIM").as_deref(),
            Some("arts")
        );
        assert_eq!(
            sidecar.volume_mounts.as_ref().unwrap()[0].mount_path,
            ARTIFACT_MOUNT
        );
        assert!(spec.containers[0].volume_mounts.is_none());
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            "arts"
        );
    }

    #[test]
    fn another_driver_is_named_to_runtimed_and_a_broken_spec_is_said() {
        let s3 =
            ArtifactStore::of(&serde_json::json!({"driver": "s3", "s3": {"bucket": "b"}})).unwrap();
        let spec = PodSpec {
            containers: vec![Container::default()],
            ..Default::default()
        };
        let spec = with_artifact_store(spec, &s3, true);
        assert_eq!(
            env(&spec.containers[0], "KRUNTIMES_ARTIFACT_DRIVER").as_deref(),
            Some("s3")
        );
        assert!(spec.volumes.is_none());
        let err = ArtifactStore::of(&serde_json::json!({"driver": "filesystem"})).unwrap_err();
        assert!(err.contains("volumeClaimName"), "{err}");
    }
}
