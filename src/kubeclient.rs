//! Connecting to a cluster the way kubectl does, and turning API failures into one clear line.
//!
//! This is an I/O edge: it reads kubeconfig files and builds clients. It makes no API calls
//! besides the ones its callers ask for.

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::cli::GlobalArgs;

/// A client plus what a user needs to recognise where it points.
#[derive(Clone)]
pub struct Target {
    pub client: Client,
    /// The configuration `client` was built from, for callers that need a client with other
    /// timeouts (leader election).
    pub config: Config,
    /// Kubeconfig context name, or `in-cluster`.
    pub context: String,
    pub server: String,
    /// `-n` when given, else the context's namespace, else `default`.
    pub namespace: String,
}

impl Target {
    /// "context NAME (server URL)", for messages.
    pub fn describe(&self) -> String {
        format!("context {} (server {})", self.context, self.server)
    }

    /// Turns an API error into one sentence that names the server and what to do.
    pub fn explain_error(&self, err: kube::Error, doing: &str) -> anyhow::Error {
        explain_error(err, doing, &self.describe())
    }
}

/// Loads the kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, then in-cluster
/// service account) and builds a client for the chosen context.
pub async fn connect(global: &GlobalArgs) -> anyhow::Result<Target> {
    let (config, context) = load_config(global).await?;
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_string();
    let namespace = global
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config.clone()).with_context(|| {
        format!("cannot build a client for context {context} (server {server})")
    })?;
    Ok(Target {
        client,
        config,
        context,
        server,
        namespace,
    })
}

async fn load_config(global: &GlobalArgs) -> anyhow::Result<(Config, String)> {
    let kubeconfig = match &global.kubeconfig {
        Some(path) => Some(read_kubeconfig(path)?),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(_) => Some(Kubeconfig::read().map_err(|e| {
                anyhow!("cannot read the kubeconfig named by $KUBECONFIG: {e}; fix the variable or pass --kubeconfig")
            })?),
            None => match home_kubeconfig() {
                Some(path) if path.exists() => Some(read_kubeconfig(&path)?),
                _ => None,
            },
        },
    };
    let Some(kubeconfig) = kubeconfig else {
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() && global.context.is_none() {
            let config = Config::incluster().map_err(|e| {
                anyhow!("cannot use the in-cluster service account: {e}; pass --kubeconfig")
            })?;
            return Ok((config, "in-cluster".to_string()));
        }
        return Err(anyhow!(
            "no kubeconfig found ($KUBECONFIG is unset and ~/.kube/config does not exist); pass --kubeconfig PATH or set KUBECONFIG"
        ));
    };
    let context = global
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .ok_or_else(|| anyhow!("the kubeconfig has no current-context; pass --context NAME"))?;
    if !kubeconfig.contexts.iter().any(|c| c.name == context) {
        return Err(anyhow!(
            "context {context:?} is not in the kubeconfig; list contexts with `kubectl config get-contexts` and pass one with --context"
        ));
    }
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| anyhow!("cannot use context {context}: {e}"))?;
    Ok((config, context))
}

fn home_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kube").join("config"))
}

fn read_kubeconfig(path: &std::path::Path) -> anyhow::Result<Kubeconfig> {
    if !path.exists() {
        return Err(anyhow!(
            "kubeconfig {} does not exist; pass --kubeconfig with an existing file or set KUBECONFIG",
            path.display()
        ));
    }
    Kubeconfig::read_from(path)
        .map_err(|e| anyhow!("cannot read kubeconfig {}: {e}", path.display()))
}

/// One sentence for an API failure: what was being done, against which server, why, and what
/// to do about it.
pub fn explain_error(err: kube::Error, doing: &str, target: &str) -> anyhow::Error {
    match &err {
        kube::Error::Api(status) if status.code == 403 => anyhow!(
            "{doing}: the API server of {target} refused: {}; ask a cluster admin for the permission or use a context that has it",
            status.message
        ),
        kube::Error::Api(status) if status.code == 401 => anyhow!(
            "{doing}: the API server of {target} rejected the credentials ({}); refresh them in your kubeconfig",
            status.message
        ),
        kube::Error::Api(status) => anyhow!(
            "{doing}: the API server of {target} answered HTTP {}: {}",
            status.code,
            status.message
        ),
        kube::Error::HyperError(_) | kube::Error::Service(_) => anyhow!(
            "{doing}: cannot reach the API server of {target}: {}; check that the cluster is running and that --context/--kubeconfig point at it",
            root_cause(&err)
        ),
        _ => anyhow!("{doing} against {target}: {}", root_cause(&err)),
    }
}

/// The innermost error message, which is what a user can act on.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// A delete that applies only to the object of `uid`: one recreated under the same name is
/// never deleted for its predecessor (409 instead).
pub fn delete_uid(uid: &str) -> kube::api::DeleteParams {
    kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..kube::api::DeleteParams::default()
    }
}

/// The backoff of every watch kruntimes runs: 200 ms doubling to at most 5 s, with jitter,
/// reset after 2 minutes of health. kube-rs' default (client-go's, up to 30 s) is kind to a
/// struggling API server, but after an outage it delays every watch of the scheduler and of
/// runtimed by up to 30 s, and with them the healing of every Run; a handful of watches per
/// process retrying every 5 s is still gentle.
pub fn watch_backoff() -> impl kube::runtime::utils::Backoff + 'static {
    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(200))
        .with_max_delay(std::time::Duration::from_secs(5))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(
        kube::runtime::watcher::ExponentialBackoff::from(builder),
        std::time::Duration::from_secs(120),
    )
}

/// The watch every kruntimes process runs of one of its own kinds: lenient (an object that does
/// not decode is reported and skipped, see [`crate::api::lenient`]) and with [`watch_backoff`].
pub fn lenient_watch<K>(
    api: kube::Api<crate::api::lenient::Lenient<K>>,
    config: kube::runtime::watcher::Config,
) -> impl futures::Stream<Item = kube::runtime::watcher::Result<kube::runtime::watcher::Event<K>>>
where
    K: kube::Resource<DynamicType = ()>
        + Default
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    use kube::runtime::WatchStreamExt as _;
    crate::api::lenient::decoded(kube::runtime::watcher(api, config).backoff(watch_backoff()))
}

/// The API of a namespaced kind in `namespace`, or across all namespaces when `None` (the
/// `--watch-namespace` / `--all-namespaces` choice every watcher and loader makes).
pub fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_names_the_target_and_what_to_do() {
        let status =
            kube::core::Status::failure("customresourcedefinitions is forbidden", "Forbidden")
                .with_code(403);
        let err = explain_error(
            kube::Error::Api(Box::new(status)),
            "installing CRDs",
            "context c (server https://x)",
        );
        let line = err.to_string();
        assert!(
            line.contains(
                "context c (server https://x) refused: customresourcedefinitions is forbidden"
            ),
            "{line}"
        );
        assert!(line.contains("ask a cluster admin"), "{line}");
        assert!(!line.contains('\n'));
    }
}
