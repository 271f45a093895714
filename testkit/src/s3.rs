//! The tests' S3 server: s3s-fs (the s3s project's S3 server over a directory, built by
//! `tests/s3/build.sh`, cached by version) on the loopback, with SigV4 credentials of its own
//! and one bucket. A real S3 REST server, not a mock: runtimed's client signs, uploads in parts
//! and lists against it as against AWS. Killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{ObjectStore as _, ObjectStoreExt as _};

pub const ACCESS_KEY: &str = "kruntimes-test";
pub const SECRET_KEY: &str = "kruntimes-test-secret";

/// A running S3 server with the bucket [`S3Server::bucket`].
pub struct S3Server {
    child: Child,
    host: String,
    port: u16,
    pub bucket: String,
    _root: tempfile::TempDir,
    /// [`S3Server::credentials`] as a credentials Secret's volume holds them.
    credentials_dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts the server on the loopback with an empty bucket `bucket` and waits until it
    /// accepts connections.
    pub async fn start(bucket: &str) -> Self {
        Self::start_on("127.0.0.1", bucket).await
    }

    /// [`Self::start`] listening on `host` (the single-node cluster's bridge address, which its
    /// Pods reach).
    pub async fn start_on(host: &str, bucket: &str) -> Self {
        let bin = crate::go_tools("tests/s3/build.sh").join("s3s-fs");
        let root = tempfile::tempdir().expect("a directory for the S3 server");
        // s3s-fs keeps a bucket as a directory of its root.
        std::fs::create_dir(root.path().join(bucket)).unwrap();
        let port = crate::free_port();
        let child = Command::new(&bin)
            .args(["--host", host, "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect((host, port)).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the S3 server did not listen on {host}:{port} within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        S3Server {
            child,
            host: host.to_string(),
            port,
            bucket: bucket.to_string(),
            _root: root,
            credentials_dir: {
                let dir = tempfile::tempdir().expect("a directory for the credentials");
                for (key, value) in Self::credentials_of() {
                    std::fs::write(dir.path().join(key), value).unwrap();
                }
                dir
            },
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// The credentials as a Secret's keys would give them.
    pub fn credentials(&self) -> Vec<(String, String)> {
        Self::credentials_of()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec()
    }

    fn credentials_of() -> [(&'static str, &'static str); 2] {
        [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ]
    }

    /// A directory of the credentials as files, as runtimed reads the Secret's volume
    /// (`--artifact-s3-credentials-dir`).
    pub fn credentials_dir(&self) -> &std::path::Path {
        self.credentials_dir.path()
    }

    /// A client of the test's own, to read what runtimed stored.
    pub fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_bucket_name(&self.bucket)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()
            .expect("an S3 client for the test server")
    }

    /// The bytes of `key`, if it exists.
    pub async fn get(&self, key: &str) -> Option<Vec<u8>> {
        match self.client().get(&key.into()).await {
            Ok(got) => Some(got.bytes().await.expect("the object's bytes").to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("reading s3://{}/{key}: {e}", self.bucket),
        }
    }

    /// Every key under `prefix`, sorted.
    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .client()
            .list(Some(&prefix.into()))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("listing s3://{}/{prefix}: {e}", self.bucket));
        keys.sort();
        keys
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
