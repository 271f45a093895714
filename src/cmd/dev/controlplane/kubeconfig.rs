//! Kubeconfig files for a control plane's identities, and clients from them.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::{Error, Result, write_private};

/// What a kubeconfig file names.
#[derive(Debug, Clone)]
pub struct KubeconfigSpec<'a> {
    pub server: &'a str,
    pub ca_pem: &'a str,
    pub token: &'a str,
    /// Used for the cluster, the user and the context.
    pub name: &'a str,
    pub namespace: &'a str,
    /// A user to impersonate (`as:`): every request is authorized as that user.
    pub impersonate: Option<&'a str>,
}

/// Writes a kubeconfig with one cluster, user and context (the current one), mode 0600.
pub fn write_kubeconfig(path: &Path, spec: &KubeconfigSpec<'_>) -> Result<()> {
    use base64::Engine as _;
    let KubeconfigSpec {
        server,
        ca_pem,
        token,
        name,
        namespace,
        impersonate,
    } = spec;
    let impersonate = impersonate
        .map(|user| format!("    as: {user}\n"))
        .unwrap_or_default();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let body = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: {namespace}\ncurrent-context: {name}\nusers:\n- name: {name}\n  user:\n    token: {token}\n{impersonate}",
    );
    write_private(path, &body)
}

/// A client for the current context of the kubeconfig at `path`.
pub async fn client_for(path: &Path) -> Result<Client> {
    let fail = |reason: String| Error::Kubeconfig {
        path: path.to_path_buf(),
        reason,
    };
    let kc = Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    Client::try_from(config).map_err(|e| fail(e.to_string()))
}
