//! The S3 artifact store: the Runtime's `spec.artifactStore.s3`, an S3-compatible bucket
//! (AWS S3, MinIO, Ceph RGW, …) reached with the `object_store` crate (Apache Arrow's,
//! maintained and used by DataFusion and Delta Lake; its ring signer keeps the binary free of
//! C). Credentials come from [`CredentialFiles`], the `credentialsSecretName` Secret mounted
//! as files in runtimed's container alone and read once at start, never from runtimed's
//! environment (a task running as runtimed's user can read `/proc/<runtimed>/environ`); without
//! them, as the AWS SDKs take them: web identity, container credentials, instance metadata.
//!
//! Each artifact is staged in an anonymous file of runtimed's (a directory archived there),
//! then uploaded from that descriptor in one request, or in parts of `uploadPartSize` with `uploadConcurrency` in flight when it
//! is larger. Async; the staging runs on a blocking thread.

use std::path::Path;
use std::sync::Arc;

use futures::{StreamExt as _, TryStreamExt as _};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::{Path as Key, PathPart};
use object_store::{
    Attribute, AttributeValue, Attributes, ObjectStore, ObjectStoreExt as _, PutMultipartOptions,
    PutOptions, WriteMultipart,
};
use tokio::io::AsyncReadExt as _;

use super::{ArtifactError, Limits, RunKey, run_path, runs_path, stage_anonymous, staged_names};

/// The smallest part S3 takes in a multipart upload, and the default.
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// Parts in flight at once by default.
pub const DEFAULT_CONCURRENCY: usize = 5;

/// `spec.artifactStore.s3`, with the Go project's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub bucket: String,
    /// Prepended to every key (without leading or trailing `/`).
    pub prefix: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub force_path_style: bool,
    /// Recorded in `status.artifactStore`; the credentials themselves are [`CredentialFiles`].
    pub credentials_secret: Option<String>,
    pub upload_part_size: u64,
    pub upload_concurrency: usize,
}

impl Config {
    /// Whether the store can be used as configured, naming the field that cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.bucket.trim().is_empty() || self.bucket.contains('/') {
            return Err(format!(
                "spec.artifactStore.s3.bucket {:?} must be a bucket name (not empty, no '/')",
                self.bucket
            ));
        }
        if let Some(endpoint) = &self.endpoint {
            let ok = url::Url::parse(endpoint)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
            if !ok {
                return Err(format!(
                    "spec.artifactStore.s3.endpoint {endpoint:?} must be an http(s) URL, e.g. https://minio.storage:9000"
                ));
            }
        }
        if self.upload_part_size < MIN_PART_SIZE {
            return Err(format!(
                "spec.artifactStore.s3.uploadPartSize {} is below S3's minimum part of {MIN_PART_SIZE} bytes",
                self.upload_part_size
            ));
        }
        if self.upload_concurrency == 0 {
            return Err("spec.artifactStore.s3.uploadConcurrency must be at least 1".into());
        }
        Ok(())
    }
}

/// The S3 store's credentials as the files of a directory named after the AWS variables that
/// would carry them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, …): the
/// `credentialsSecretName` Secret mounted as a volume, whose keys are those names (the Go
/// project exposes the same keys as environment variables). Read once; never printed.
pub struct CredentialFiles(Vec<(AmazonS3ConfigKey, String)>);

impl std::fmt::Debug for CredentialFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(key, _)| key.as_ref()))
            .finish()
    }
}

impl CredentialFiles {
    /// Reads `dir`'s `AWS_*` files (a Secret volume's entries are links into its `..data`, so
    /// links are followed: the directory is runtimed's own, no task writes it). An access key
    /// without its secret, or a directory with neither, is refused with what to put there.
    pub fn read(dir: &Path) -> Result<Self, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            format!(
                "cannot read the S3 store's credentials in {}: {e}; mount the credentialsSecretName Secret there",
                dir.display()
            )
        })?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let Some(name) = entry.file_name().to_str().map(String::from) else {
                continue;
            };
            // As `AmazonS3Builder::from_env` takes the environment: `AWS_*` names it knows.
            let key = match name.strip_prefix("AWS_") {
                Some(_) => name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>(),
                None => continue,
            };
            let Ok(key) = key else {
                continue;
            };
            let value = std::fs::read_to_string(entry.path())
                .map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
            found.push((name, key, value.trim().to_string()));
        }
        let has = |wanted: &str| found.iter().any(|(name, ..)| name == wanted);
        match (has("AWS_ACCESS_KEY_ID"), has("AWS_SECRET_ACCESS_KEY")) {
            (true, true) => {}
            (false, false) if !found.is_empty() => {}
            (id, _) => {
                return Err(format!(
                    "{} holds {}: the credentialsSecretName Secret needs the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                    dir.display(),
                    match (found.is_empty(), id) {
                        (true, _) => "no AWS_* key".to_string(),
                        (false, true) => "AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY".into(),
                        (false, false) => "AWS_SECRET_ACCESS_KEY without AWS_ACCESS_KEY_ID".into(),
                    }
                ));
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(CredentialFiles(
            found
                .into_iter()
                .map(|(_, key, value)| (key, value))
                .collect(),
        ))
    }
}

/// The store: its configuration and a client.
#[derive(Debug, Clone)]
pub struct S3 {
    pub config: Config,
    client: Arc<AmazonS3>,
}

impl S3 {
    /// A client for `config`, with `credentials` (else the SDKs' chain: web identity,
    /// container, instance) and TLS trusting Mozilla's roots and the system's (`SSL_CERT_FILE`
    /// for a private CA).
    pub fn new(mut config: Config, credentials: Option<&CredentialFiles>) -> Result<Self, String> {
        config.prefix = config.prefix.trim().trim_matches('/').to_string();
        config.check()?;
        let tls = super::super::tls::client_config(None)?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(std::time::Duration::from_secs(10))
            // One request is one part at most: a stalled one ends, and the collection retries.
            .timeout(std::time::Duration::from_secs(300))
            .build()
            .map_err(|e| format!("cannot build the S3 client: {e}"))?;
        let mut builder = AmazonS3Builder::from_env();
        for (key, value) in credentials.iter().flat_map(|c| &c.0) {
            builder = builder.with_config(*key, value);
        }
        let mut builder = builder
            .with_bucket_name(&config.bucket)
            .with_http_connector(Connector(http));
        if let Some(region) = &config.region {
            builder = builder.with_region(region);
        }
        match &config.endpoint {
            Some(endpoint) => {
                builder = builder
                    .with_allow_http(endpoint.starts_with("http://"))
                    .with_endpoint(match config.force_path_style {
                        true => endpoint.trim_end_matches('/').to_string(),
                        false => virtual_host(endpoint, &config.bucket)?,
                    })
                    .with_virtual_hosted_style_request(!config.force_path_style);
            }
            None => builder = builder.with_virtual_hosted_style_request(!config.force_path_style),
        }
        let client = builder
            .build()
            .map_err(|e| format!("spec.artifactStore.s3: {e}"))?;
        Ok(S3 {
            config,
            client: Arc::new(client),
        })
    }

    pub fn snapshot(&self) -> serde_json::Value {
        let c = &self.config;
        let mut s3 = serde_json::json!({"bucket": c.bucket});
        let mut set = |field: &str, value: serde_json::Value| {
            s3[field] = value;
        };
        if !c.prefix.is_empty() {
            set("prefix", c.prefix.clone().into());
        }
        if let Some(region) = &c.region {
            set("region", region.clone().into());
        }
        if let Some(endpoint) = &c.endpoint {
            set("endpoint", endpoint.clone().into());
        }
        if c.force_path_style {
            set("forcePathStyle", true.into());
        }
        if let Some(secret) = &c.credentials_secret {
            set("credentialsSecretName", secret.clone().into());
        }
        if c.upload_part_size != MIN_PART_SIZE {
            set("uploadPartSize", c.upload_part_size.into());
        }
        if c.upload_concurrency != DEFAULT_CONCURRENCY {
            set("uploadConcurrency", c.upload_concurrency.into());
        }
        serde_json::json!({"driver": "s3", "s3": s3})
    }

    /// The key of `relative` (a `/`-separated path of this module) under the prefix.
    fn key(&self, relative: &str) -> Key {
        self.config
            .prefix
            .split('/')
            .chain(relative.split('/'))
            .filter(|part| !part.is_empty())
            .map(PathPart::from)
            .collect()
    }

    /// `scratch` is where the anonymous staged copies are made.
    pub async fn collect(
        &self,
        staging: &std::path::Path,
        scratch: &std::path::Path,
        run: &RunKey,
        limits: Limits,
    ) -> Result<Vec<serde_json::Value>, ArtifactError> {
        let read = staging.to_path_buf();
        let names = tokio::task::spawn_blocking(move || staged_names(&read))
            .await
            .map_err(|e| ArtifactError::Store(e.to_string()))??;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let result = self.upload_all(staging, scratch, run, limits, &names).await;
        if result.is_err() {
            let _ = self.remove_run(&run.namespace, &run.uid).await;
        }
        result
    }

    async fn upload_all(
        &self,
        staging: &std::path::Path,
        scratch: &std::path::Path,
        run: &RunKey,
        limits: Limits,
        names: &[String],
    ) -> Result<Vec<serde_json::Value>, ArtifactError> {
        let store_error = |e: String| ArtifactError::Store(e);
        let mut refs = Vec::new();
        let mut total = 0u64;
        for name in names {
            let source = staging.join(name);
            let limit = super::next_limit(limits, total);
            let (n, scratch) = (name.clone(), scratch.to_path_buf());
            // Staged in an anonymous file and uploaded from its descriptor: the bytes sent
            // are the bytes hashed, whatever a task does to its directory meanwhile.
            let (stored, staged) =
                tokio::task::spawn_blocking(move || stage_anonymous(&source, &scratch, &n, limit))
                    .await
                    .map_err(|e| store_error(e.to_string()))??;
            total += stored.size;
            let key = self.key(&format!("{}/{name}", run_path(&run.namespace, &run.uid)));
            let attributes = Attributes::from_iter([
                (Attribute::ContentType, stored.content_type.clone().into()),
                metadata("kruntimes-run-name", &run.name),
                metadata("kruntimes-run-uid", &run.uid),
                metadata("kruntimes-namespace", &run.namespace),
                metadata("kruntimes-artifact-name", name),
                metadata("kruntimes-artifact-type", stored.kind),
                metadata("kruntimes-digest", &stored.digest),
            ]);
            self.upload(staged, &key, stored.size, attributes)
                .await
                .map_err(|e| {
                    store_error(format!(
                        "artifact {name:?}: uploading to s3://{}/{key}: {e}",
                        self.config.bucket
                    ))
                })?;
            let location = serde_json::json!({"bucket": self.config.bucket, "key": key.as_ref()});
            refs.push(stored.to_ref(name, "s3", location));
        }
        Ok(refs)
    }

    /// One request up to a part's size; beyond it a multipart upload, aborted on failure.
    async fn upload(
        &self,
        file: std::fs::File,
        key: &Key,
        size: u64,
        attributes: Attributes,
    ) -> Result<(), String> {
        let part = self.config.upload_part_size;
        if size <= part {
            let mut bytes = Vec::with_capacity(size as usize);
            tokio::fs::File::from_std(file)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| e.to_string())?;
            let options = PutOptions {
                attributes,
                ..Default::default()
            };
            self.client
                .put_opts(key, bytes.into(), options)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        let options = PutMultipartOptions {
            attributes,
            ..Default::default()
        };
        let upload = self
            .client
            .put_multipart_opts(key, options)
            .await
            .map_err(|e| e.to_string())?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part as usize);
        let mut input = tokio::fs::File::from_std(file);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match input.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(e.to_string());
                }
            };
            if let Err(e) = writer
                .wait_for_capacity(self.config.upload_concurrency)
                .await
            {
                let _ = writer.abort().await;
                return Err(e.to_string());
            }
            writer.write(&buf[..n]);
        }
        writer.finish().await.map_err(|e| e.to_string())?;
        Ok(())
    }

    pub async fn stored_runs(&self, namespace: &str) -> Result<Vec<String>, String> {
        let listed = self
            .client
            .list_with_delimiter(Some(&self.key(&runs_path(namespace))))
            .await
            .map_err(|e| e.to_string())?;
        let mut uids: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(String::from))
            .collect();
        uids.sort();
        Ok(uids)
    }

    /// Removes every object under the Run's prefix (`true`: listing and deleting are one
    /// request stream, so it does not tell whether there were any).
    pub async fn remove_run(&self, namespace: &str, uid: &str) -> Result<bool, String> {
        let prefix = self.key(&run_path(namespace, uid));
        let keys = self
            .client
            .list(Some(&prefix))
            .map_ok(|meta| meta.location)
            .boxed();
        self.client
            .delete_stream(keys)
            .try_collect::<Vec<_>>()
            .await
            .map(|_| true)
            .map_err(|e| format!("s3://{}/{prefix}: {e}", self.config.bucket))
    }

    pub async fn open(
        &self,
        namespace: &str,
        uid: &str,
        name: &str,
    ) -> Result<Option<super::Bytes>, String> {
        let key = self.key(&format!("{}/{name}", run_path(namespace, uid)));
        match self.client.get(&key).await {
            Ok(got) => Ok(Some(
                got.into_stream().map_err(std::io::Error::other).boxed(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn metadata(key: &'static str, value: &str) -> (Attribute, AttributeValue) {
    (Attribute::Metadata(key.into()), value.to_string().into())
}

/// `endpoint` with `bucket` as the first label of its host: a virtual-hosted-style request's
/// endpoint, as the AWS SDKs build it from a custom endpoint.
fn virtual_host(endpoint: &str, bucket: &str) -> Result<String, String> {
    let mut url = url::Url::parse(endpoint).map_err(|e| e.to_string())?;
    let host = url.host_str().unwrap_or_default().to_string();
    url.set_host(Some(&format!("{bucket}.{host}")))
        .map_err(|e| format!("spec.artifactStore.s3.endpoint {endpoint:?} with bucket {bucket:?}: {e} (set forcePathStyle)"))?;
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// object_store's HTTP client: reqwest, configured as runtimed's other outside clients are.
#[derive(Debug)]
struct Connector(reqwest::Client);

impl object_store::client::HttpConnector for Connector {
    fn connect(
        &self,
        _options: &object_store::ClientOptions,
    ) -> object_store::Result<object_store::client::HttpClient> {
        Ok(object_store::client::HttpClient::new(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            bucket: "arts".into(),
            prefix: "/team/a/".into(),
            region: Some("eu-west-1".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            force_path_style: true,
            credentials_secret: Some("s3-creds".into()),
            upload_part_size: MIN_PART_SIZE,
            upload_concurrency: DEFAULT_CONCURRENCY,
        }
    }

    #[test]
    fn keys_are_the_go_projects_layout_under_the_trimmed_prefix() {
        let s3 = S3::new(config(), None).unwrap();
        assert_eq!(
            s3.key(&format!("{}/model", run_path("ns", "u1"))).as_ref(),
            "team/a/namespaces/ns/runs/u1/model"
        );
        assert_eq!(
            s3.snapshot(),
            serde_json::json!({"driver": "s3", "s3": {
                "bucket": "arts", "prefix": "team/a", "region": "eu-west-1",
                "endpoint": "http://127.0.0.1:9000", "forcePathStyle": true,
                "credentialsSecretName": "s3-creds",
            }})
        );
        let bare = S3::new(
            Config {
                prefix: String::new(),
                ..config()
            },
            None,
        )
        .unwrap();
        assert_eq!(bare.key("namespaces/ns").as_ref(), "namespaces/ns");
    }

    #[test]
    fn a_store_that_cannot_work_names_its_field() {
        for (bad, field) in [
            (
                Config {
                    bucket: "a/b".into(),
                    ..config()
                },
                "bucket",
            ),
            (
                Config {
                    endpoint: Some("minio:9000".into()),
                    ..config()
                },
                "endpoint",
            ),
            (
                Config {
                    upload_part_size: 1024,
                    ..config()
                },
                "uploadPartSize",
            ),
            (
                Config {
                    upload_concurrency: 0,
                    ..config()
                },
                "uploadConcurrency",
            ),
        ] {
            let err = S3::new(bad, None).unwrap_err();
            assert!(
                err.contains(&format!("spec.artifactStore.s3.{field}")),
                "{err}"
            );
        }
    }

    #[test]
    fn credentials_are_the_aws_files_of_a_secret_volume_and_are_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        // A Secret volume: each key a link into `..data`, beside the kubelet's own entries.
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        for (key, value) in [
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t-value\n"),
            ("README", "not a credential"),
        ] {
            std::fs::write(dir.path().join("..data").join(key), value).unwrap();
            std::os::unix::fs::symlink(format!("..data/{key}"), dir.path().join(key)).unwrap();
        }
        let files = CredentialFiles::read(dir.path()).unwrap();
        assert_eq!(
            files.0,
            [
                (AmazonS3ConfigKey::AccessKeyId, "AKIDEXAMPLE".to_string()),
                (
                    AmazonS3ConfigKey::SecretAccessKey,
                    "s3cr3t-value".to_string()
                ),
            ]
        );
        let printed = format!("{files:?}");
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("AKIDEXAMPLE"),
            "{printed}"
        );
        S3::new(config(), Some(&files)).unwrap();

        std::fs::remove_file(dir.path().join("AWS_SECRET_ACCESS_KEY")).unwrap();
        let err = CredentialFiles::read(dir.path()).unwrap_err();
        assert!(
            err.contains("AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY"),
            "{err}"
        );
        let empty = tempfile::tempdir().unwrap();
        let err = CredentialFiles::read(empty.path()).unwrap_err();
        assert!(err.contains("holds no AWS_* key"), "{err}");
        let err = CredentialFiles::read(&empty.path().join("absent")).unwrap_err();
        assert!(
            err.contains("mount the credentialsSecretName Secret there"),
            "{err}"
        );
    }

    #[test]
    fn a_virtual_hosted_endpoint_puts_the_bucket_in_the_host() {
        assert_eq!(
            virtual_host("https://s3.example.com:9000/", "arts").unwrap(),
            "https://arts.s3.example.com:9000"
        );
    }
}
