//! The artifact store of a Runtime Pod: the Runtime's `spec.artifactStore`, driver
//! `filesystem`, is its PersistentVolumeClaim mounted in the container that runs runtimed at
//! [`ARTIFACT_MOUNT`], which runtimed is told with `KRUNTIMES_ARTIFACT_ROOT` and
//! `KRUNTIMES_ARTIFACT_VOLUME_CLAIM`. Driver `s3` is its fields as `KRUNTIMES_ARTIFACT_S3_*`
//! and its `credentialsSecretName` Secret as a volume mounted at [`CREDENTIALS_MOUNT`] in
//! runtimed's container alone (its keys, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, …, as
//! files runtimed reads once): never as environment variables, which a task running as
//! runtimed's user reads in `/proc`, and never in a container of the template's.
//! Another driver is passed on as `KRUNTIMES_ARTIFACT_DRIVER`, so that runtimed refuses a Run's
//! artifacts with a clear reason instead of dropping them. Pure.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, PersistentVolumeClaimVolumeSource, PodSpec, SecretVolumeSource, Volume,
    VolumeMount,
};

/// The volume of the filesystem artifact store.
pub const ARTIFACT_VOLUME: &str = "kruntimes-artifacts";
/// Where runtimed sees it.
pub const ARTIFACT_MOUNT: &str = "/var/lib/kruntimes/artifacts";
/// The volume of the S3 store's credentials Secret.
pub const CREDENTIALS_VOLUME: &str = "kruntimes-artifact-credentials";
/// Where runtimed reads them (`--artifact-s3-credentials-dir`).
pub const CREDENTIALS_MOUNT: &str = "/var/run/secrets/kruntimes.io/artifact-store";

/// What a Runtime's `spec.artifactStore` asks of its Pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactStore {
    /// `driver: filesystem` with its claim.
    Filesystem { volume_claim: String },
    /// `driver: s3`: runtimed's `--artifact-s3-*` settings as environment variables, and the
    /// Secret whose keys are its credentials.
    S3 {
        env: Vec<(&'static str, String)>,
        credentials_secret: Option<String>,
    },
    /// Any other driver: runtimed is told, and refuses artifacts it cannot store.
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
            "s3" => s3(&spec["s3"]),
            "" => Err("spec.artifactStore.driver is required (filesystem or s3)".into()),
            other => Ok(ArtifactStore::Other {
                driver: other.to_string(),
            }),
        }
    }
}

/// `spec.artifactStore.s3` as runtimed's settings (the bounds of its values are runtimed's to
/// check, so that a Run sees the refusal).
fn s3(s3: &serde_json::Value) -> Result<ArtifactStore, String> {
    let bucket = s3["bucket"]
        .as_str()
        .filter(|b| !b.is_empty())
        .ok_or("spec.artifactStore.s3.bucket is required with driver s3")?;
    let mut env = vec![("KRUNTIMES_ARTIFACT_S3_BUCKET", bucket.to_string())];
    for (field, name) in [
        ("prefix", "KRUNTIMES_ARTIFACT_S3_PREFIX"),
        ("region", "KRUNTIMES_ARTIFACT_S3_REGION"),
        ("endpoint", "KRUNTIMES_ARTIFACT_S3_ENDPOINT"),
        (
            "credentialsSecretName",
            "KRUNTIMES_ARTIFACT_S3_CREDENTIALS_SECRET",
        ),
    ] {
        if let Some(value) = s3[field].as_str().filter(|v| !v.is_empty()) {
            env.push((name, value.to_string()));
        }
    }
    if s3["forcePathStyle"].as_bool() == Some(true) {
        env.push(("KRUNTIMES_ARTIFACT_S3_FORCE_PATH_STYLE", "true".into()));
    }
    for (field, name) in [
        ("uploadPartSize", "KRUNTIMES_ARTIFACT_S3_UPLOAD_PART_SIZE"),
        (
            "uploadConcurrency",
            "KRUNTIMES_ARTIFACT_S3_UPLOAD_CONCURRENCY",
        ),
    ] {
        match &s3[field] {
            serde_json::Value::Null => {}
            serde_json::Value::Number(n) if n.as_u64().is_some_and(|n| n > 0) => {
                env.push((name, n.to_string()))
            }
            other => {
                return Err(format!(
                    "spec.artifactStore.s3.{field} {other} must be a positive integer"
                ));
            }
        }
    }
    Ok(ArtifactStore::S3 {
        env,
        credentials_secret: s3["credentialsSecretName"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from),
    })
}

/// Gives the container that runs runtimed (the sidecar `runtimed` when there is one, else the
/// main container) the artifact store of `store`. Nothing without injection.
pub fn with_artifact_store(mut spec: PodSpec, store: &ArtifactStore, inject: bool) -> PodSpec {
    let Some(index) = super::runtimed_container(&spec).filter(|_| inject) else {
        return spec;
    };
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
        ArtifactStore::S3 {
            env: settings,
            credentials_secret,
        } => {
            for (name, value) in settings {
                set(name, value);
            }
            if let Some(secret) = credentials_secret {
                set("KRUNTIMES_ARTIFACT_S3_CREDENTIALS_DIR", CREDENTIALS_MOUNT);
                runtimed
                    .volume_mounts
                    .get_or_insert_with(Vec::new)
                    .push(VolumeMount {
                        name: CREDENTIALS_VOLUME.into(),
                        mount_path: CREDENTIALS_MOUNT.into(),
                        read_only: Some(true),
                        ..Default::default()
                    });
                spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                    name: CREDENTIALS_VOLUME.into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(secret.clone()),
                        // Read by runtimed's user, whichever the image's is; the volume is
                        // in no other container.
                        default_mode: Some(0o444),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
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
    use super::super::SIDECAR_CONTAINER;
    use super::super::env_value as env;
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    /// A runtime-server template's spec: the `runtime` container and runtimed's sidecar.
    fn runtime_and_sidecar() -> PodSpec {
        let named = |name: &str| Container {
            name: name.into(),
            ..Default::default()
        };
        PodSpec {
            containers: vec![named("runtime"), named(SIDECAR_CONTAINER)],
            ..Default::default()
        }
    }

    #[test]
    fn a_filesystem_store_is_its_claim_mounted_where_runtimed_runs() {
        let store = ArtifactStore::of(
            &serde_json::json!({"driver": "filesystem", "filesystem": {"volumeClaimName": "arts"}}),
        )
        .unwrap();
        let spec = runtime_and_sidecar();
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
    fn an_s3_store_is_runtimeds_settings_and_its_secret_as_files_of_runtimeds_alone() {
        let store = ArtifactStore::of(&serde_json::json!({"driver": "s3", "s3": {
            "bucket": "arts", "prefix": "team", "endpoint": "http://minio:9000",
            "forcePathStyle": true, "credentialsSecretName": "s3-creds",
            "uploadPartSize": 8388608, "uploadConcurrency": 2,
        }}))
        .unwrap();
        let spec = runtime_and_sidecar();
        let spec = with_artifact_store(spec, &store, true);
        let runtimed = &spec.containers[1];
        for (name, value) in [
            ("KRUNTIMES_ARTIFACT_S3_BUCKET", "arts"),
            ("KRUNTIMES_ARTIFACT_S3_PREFIX", "team"),
            ("KRUNTIMES_ARTIFACT_S3_ENDPOINT", "http://minio:9000"),
            ("KRUNTIMES_ARTIFACT_S3_FORCE_PATH_STYLE", "true"),
            ("KRUNTIMES_ARTIFACT_S3_CREDENTIALS_SECRET", "s3-creds"),
            ("KRUNTIMES_ARTIFACT_S3_UPLOAD_PART_SIZE", "8388608"),
            ("KRUNTIMES_ARTIFACT_S3_UPLOAD_CONCURRENCY", "2"),
            ("KRUNTIMES_ARTIFACT_S3_CREDENTIALS_DIR", CREDENTIALS_MOUNT),
        ] {
            assert_eq!(env(runtimed, name).as_deref(), Some(value), "{name}");
        }
        assert_eq!(env(runtimed, "KRUNTIMES_ARTIFACT_S3_REGION"), None);
        // The Secret is files in runtimed's container, in no environment and no other container.
        assert!(spec.containers.iter().all(|c| c.env_from.is_none()));
        let mount = &runtimed.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (
                mount.name.as_str(),
                mount.mount_path.as_str(),
                mount.read_only
            ),
            (CREDENTIALS_VOLUME, CREDENTIALS_MOUNT, Some(true))
        );
        assert!(spec.containers[0].volume_mounts.is_none());
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(
            volume.secret.as_ref().unwrap().secret_name.as_deref(),
            Some("s3-creds")
        );
        let err = ArtifactStore::of(&serde_json::json!({"driver": "s3", "s3": {}})).unwrap_err();
        assert!(err.contains("spec.artifactStore.s3.bucket"), "{err}");
        let err = ArtifactStore::of(
            &serde_json::json!({"driver": "s3", "s3": {"bucket": "b", "uploadConcurrency": "2"}}),
        )
        .unwrap_err();
        assert!(err.contains("uploadConcurrency"), "{err}");
    }

    #[test]
    fn another_driver_is_named_to_runtimed_and_a_broken_spec_is_said() {
        let other =
            ArtifactStore::of(&serde_json::json!({"driver": "gcs", "gcs": {"bucket": "b"}}))
                .unwrap();
        let spec = PodSpec {
            containers: vec![Container::default()],
            ..Default::default()
        };
        let spec = with_artifact_store(spec, &other, true);
        assert_eq!(
            env(&spec.containers[0], "KRUNTIMES_ARTIFACT_DRIVER").as_deref(),
            Some("gcs")
        );
        assert!(spec.volumes.is_none());
        let err = ArtifactStore::of(&serde_json::json!({"driver": "filesystem"})).unwrap_err();
        assert!(err.contains("volumeClaimName"), "{err}");
    }
}
