//! Connecting to a cluster the way kubectl does, and turning API failures into one clear line.
//!
//! This is an I/O edge: it reads kubeconfig files and builds clients. It makes no API calls
//! besides the ones its callers ask for. What to connect to comes in as [`ConnectOptions`]
//! (kubectl's connection flags, which the CLI parses into them): nothing here knows the CLI.

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// How to reach the cluster and as whom: kubectl's connection flags (`--kubeconfig`,
/// `--context`, `-n`, `--cluster`, `--user`, `-s`, `--token`, `--certificate-authority`,
/// `--insecure-skip-tls-verify`, `--as`, `--as-group`, `--request-timeout`), each `None` (or
/// empty) when not given.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    pub cluster: Option<String>,
    pub user: Option<String>,
    pub server: Option<String>,
    pub token: Option<String>,
    pub certificate_authority: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
    pub as_user: Option<String>,
    pub as_group: Vec<String>,
    pub request_timeout: Option<std::time::Duration>,
}

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

    /// The Run `name` of the namespace, or a sentence saying it does not exist or why it
    /// cannot be read.
    pub async fn get_run(&self, name: &str) -> anyhow::Result<crate::api::Run> {
        let runs: kube::Api<crate::api::Run> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        match runs.get_opt(name).await {
            Ok(Some(run)) => Ok(run),
            Ok(None) => Err(anyhow!(
                "run/{name} not found in namespace {}",
                self.namespace
            )),
            Err(e) => Err(self.explain_error(e, &format!("reading run/{name}"))),
        }
    }

    /// The path of subresource `rest` (`log?…`, `invoke`, `artifacts/NAME`) of Run `run` in
    /// the namespace, in the aggregated API the gateway serves: the API server authenticates
    /// and authorises the caller, and no credential of theirs goes further.
    pub fn subresource_path(&self, run: &str, rest: &str) -> String {
        use crate::api::{SUBRESOURCES_GROUP, SUBRESOURCES_VERSION};
        format!(
            "/apis/{SUBRESOURCES_GROUP}/{SUBRESOURCES_VERSION}/namespaces/{}/runs/{run}/{rest}",
            self.namespace
        )
    }

    /// The body of a GET of subresource `rest` of Run `run` through the gateway, as it comes;
    /// a refusal becomes [`subresource_error`] with `failed`.
    pub async fn subresource_stream(
        &self,
        run: &str,
        rest: &str,
        failed: &str,
    ) -> anyhow::Result<impl futures::AsyncBufRead + use<>> {
        let request = http::Request::get(self.subresource_path(run, rest))
            .body(Vec::new())
            .context("building the request")?;
        self.client
            .request_stream(request)
            .await
            .map_err(|e| subresource_error(e, failed))
    }
}

/// A request to a Run's subresource that failed, as one sentence: `failed` (what failed, and
/// where), the status code and the gateway's or the API server's message.
pub fn subresource_error(err: kube::Error, failed: &str) -> anyhow::Error {
    let apiservice = "APIService v1alpha1.subresources.kruntimes.io";
    match err {
        // The API server's own words when no APIService routes the group, or when the gateway
        // behind it does not answer: say which object to look at.
        kube::Error::Api(s)
            if s.code == 404
                && s.reason == "NotFound"
                && s.message.starts_with("the server could not find") =>
        {
            anyhow!(
                "{failed} (404): the API server does not serve subresources.kruntimes.io; install the scheduler with its gateway (kubectl kruntimes install), which registers {apiservice}"
            )
        }
        kube::Error::Api(s)
            if s.code == 503 && s.message.contains("currently unable to handle") =>
        {
            anyhow!(
                "{failed} (503): the kruntimes gateway does not answer the API server; see kubectl get apiservice v1alpha1.subresources.kruntimes.io and the scheduler's Pods in namespace kubectl-kruntimes"
            )
        }
        kube::Error::Api(s) => anyhow!("{failed} ({}): {}", s.code, s.message.trim()),
        other => anyhow!("{failed}: {other}"),
    }
}

/// Loads the kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, then in-cluster
/// service account) and builds a client for the chosen context.
pub async fn connect(options: impl Into<ConnectOptions>) -> anyhow::Result<Target> {
    let options = options.into();
    let global = &options;
    let (config, context) = load_config(global).await?;
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_string();
    let namespace = global
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = client_for(config.clone()).with_context(|| {
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

/// A client of `config` whose requests are counted in [`crate::telemetry::metrics`]'s API client
/// metrics: every client kruntimes makes.
pub fn client_for(config: Config) -> kube::Result<Client> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&crate::telemetry::metrics::ApiClientLayer)
        .build())
}

async fn load_config(global: &ConnectOptions) -> anyhow::Result<(Config, String)> {
    if !global.as_group.is_empty() && global.as_user.is_none() {
        return Err(anyhow!(
            "--as-group needs --as USER: Kubernetes impersonates groups only together with a user"
        ));
    }
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
    let kubeconfig = match (kubeconfig, &global.server) {
        (Some(kubeconfig), _) => kubeconfig,
        // kubectl's `--server URL --token T` with no kubeconfig at all.
        (None, Some(_)) => flags_only_kubeconfig(),
        (None, None) => {
            if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() && global.context.is_none() {
                if global.certificate_authority.is_some() {
                    return Err(anyhow!(
                        "--certificate-authority applies to a kubeconfig's cluster or to --server; inside a cluster pass --server too, or --kubeconfig"
                    ));
                }
                let mut config = Config::incluster().map_err(|e| {
                    anyhow!("cannot use the in-cluster service account: {e}; pass --kubeconfig")
                })?;
                override_credentials(&mut config, global);
                return Ok((config, "in-cluster".to_string()));
            }
            return Err(anyhow!(
                "no kubeconfig found ($KUBECONFIG is unset and ~/.kube/config does not exist); pass --kubeconfig PATH or set KUBECONFIG, or --server URL with --token"
            ));
        }
    };
    let context = global
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .ok_or_else(|| anyhow!("the kubeconfig has no current-context; pass --context NAME"))?;
    let kubeconfig = override_kubeconfig(kubeconfig, &context, global)?;
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        cluster: global.cluster.clone(),
        user: global.user.clone(),
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| anyhow!("cannot use context {context}: {e}"))?;
    override_credentials(&mut config, global);
    Ok((config, context))
}

/// The context of a kubeconfig made from `--server` (and the other flags) alone.
const FLAGS_ONLY: &str = "kubectl-kruntimes-flags";

/// A kubeconfig of one empty cluster, user and context, for `--server` without any kubeconfig:
/// [`override_kubeconfig`] fills it from the flags.
fn flags_only_kubeconfig() -> Kubeconfig {
    use kube::config::{Context, NamedCluster, NamedContext};
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: FLAGS_ONLY.into(),
            cluster: Some(Default::default()),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: FLAGS_ONLY.into(),
            context: Some(Context {
                cluster: FLAGS_ONLY.into(),
                user: Some(FLAGS_ONLY.into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![kube::config::NamedAuthInfo {
            name: FLAGS_ONLY.into(),
            auth_info: Some(Default::default()),
            ..Default::default()
        }],
        current_context: Some(FLAGS_ONLY.into()),
        ..Default::default()
    }
}

/// kubectl's connection flags applied to the kubeconfig's cluster (the context's, or
/// `--cluster`): `--server`, `--certificate-authority`, `--insecure-skip-tls-verify`. Checks
/// that the context, `--cluster` and `--user` exist, naming what to pass instead.
fn override_kubeconfig(
    mut kubeconfig: Kubeconfig,
    context: &str,
    global: &ConnectOptions,
) -> anyhow::Result<Kubeconfig> {
    let Some(named) = kubeconfig.contexts.iter().find(|c| c.name == context) else {
        return Err(anyhow!(
            "context {context:?} is not in the kubeconfig; list contexts with `kubectl config get-contexts` and pass one with --context"
        ));
    };
    let cluster_name = global
        .cluster
        .clone()
        .or_else(|| named.context.as_ref().map(|c| c.cluster.clone()))
        .unwrap_or_default();
    if let Some(user) = &global.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(anyhow!(
            "user {user:?} is not in the kubeconfig; list users with `kubectl config view -o jsonpath='{{.users[*].name}}'` and pass one with --user"
        ));
    }
    let Some(cluster) = kubeconfig
        .clusters
        .iter_mut()
        .find(|c| c.name == cluster_name)
    else {
        return Err(anyhow!(
            "cluster {cluster_name:?} is not in the kubeconfig; list clusters with `kubectl config get-clusters` and pass one with --cluster"
        ));
    };
    let cluster = cluster.cluster.get_or_insert_with(Default::default);
    if let Some(server) = &global.server {
        if server
            .parse::<http::Uri>()
            .map_or(true, |u| u.scheme().is_none())
        {
            return Err(anyhow!(
                "--server {server:?} is not a URL; pass the API server's address, e.g. https://127.0.0.1:6443"
            ));
        }
        cluster.server = Some(server.clone());
    }
    if let Some(ca) = &global.certificate_authority {
        if !ca.exists() {
            return Err(anyhow!(
                "--certificate-authority {} does not exist; pass the PEM file of the CA that signed the API server's certificate",
                ca.display()
            ));
        }
        cluster.certificate_authority = Some(ca.display().to_string());
        cluster.certificate_authority_data = None;
    }
    if global.insecure_skip_tls_verify {
        cluster.insecure_skip_tls_verify = Some(true);
        cluster.certificate_authority = None;
        cluster.certificate_authority_data = None;
    }
    Ok(kubeconfig)
}

/// kubectl's credential flags applied to the client configuration: `--token` replaces the
/// user's credentials, `--as`/`--as-group` impersonate, `--insecure-skip-tls-verify` and
/// `--request-timeout` (0: no limit).
fn override_credentials(config: &mut Config, global: &ConnectOptions) {
    if let Some(token) = &global.token {
        config.auth_info = kube::config::AuthInfo {
            token: Some(secrecy::SecretString::from(token.clone())),
            ..Default::default()
        };
    }
    if let Some(user) = &global.as_user {
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups =
            (!global.as_group.is_empty()).then(|| global.as_group.clone());
    }
    if global.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
        config.root_cert = None;
    }
    if let Some(timeout) = global.request_timeout {
        let timeout = (!timeout.is_zero()).then_some(timeout);
        config.read_timeout = timeout;
        config.write_timeout = timeout;
        config.connect_timeout = timeout.or(config.connect_timeout);
    }
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

/// What no kruntimes store reads and every object carries: `managedFields` (often larger than
/// the rest of a Run) and kubectl's `last-applied-configuration` annotation (a second copy of
/// the object). Stripped from every watched object before it is stored, as kube-scheduler's
/// informers do with a transform.
pub fn slim<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// A watch of `api` with [`watch_backoff`], each object [`slim`]med before anyone sees it.
pub fn slim_watch<K>(
    api: kube::Api<K>,
    config: kube::runtime::watcher::Config,
) -> impl futures::Stream<Item = kube::runtime::watcher::Result<kube::runtime::watcher::Event<K>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    use kube::runtime::WatchStreamExt as _;
    kube::runtime::watcher(api, config)
        .backoff(watch_backoff())
        .modify(slim::<K>)
}

/// A watch of `api` with [`watch_backoff`], each object turned into what the caller keeps of
/// it (`into`) as it arrives, so a relist buffers that and never the whole objects.
pub fn kept_watch<K, T>(
    api: kube::Api<K>,
    config: kube::runtime::watcher::Config,
    into: fn(&K) -> T,
) -> impl futures::Stream<Item = kube::runtime::watcher::Result<kube::runtime::watcher::Event<T>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    use futures::TryStreamExt as _;
    use kube::runtime::WatchStreamExt as _;
    kube::runtime::watcher(api, config)
        .backoff(watch_backoff())
        .map_ok(move |event| kept(event, into))
}

/// `event` with its object turned into what is kept of it (`into`).
pub fn kept<K, T>(
    event: kube::runtime::watcher::Event<K>,
    into: impl FnOnce(&K) -> T,
) -> kube::runtime::watcher::Event<T> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(obj) => Event::Apply(into(&obj)),
        Event::Delete(obj) => Event::Delete(into(&obj)),
        Event::Init => Event::Init,
        Event::InitApply(obj) => Event::InitApply(into(&obj)),
        Event::InitDone => Event::InitDone,
    }
}

/// The watch every kruntimes process runs of one of its own kinds: lenient (an object that does
/// not decode is reported and skipped, see [`crate::api::lenient`]), with [`watch_backoff`],
/// each object [`slim`]med.
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
        .modify(slim::<K>)
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

    #[test]
    fn a_missing_or_silent_gateway_names_its_apiservice() {
        let api = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(message, reason).with_code(code),
            ))
        };
        let missing = subresource_error(
            api(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
            "run/a: cannot read its log",
        )
        .to_string();
        assert!(
            missing.contains("registers APIService v1alpha1.subresources.kruntimes.io"),
            "{missing}"
        );
        let silent = subresource_error(
            api(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            "run/a: cannot read its log",
        )
        .to_string();
        assert!(silent.contains("kubectl get apiservice"), "{silent}");
        // The gateway's own answers pass through as they are.
        let gone = subresource_error(
            api(404, "NotFound", "runs.kruntimes.io \"a\" not found"),
            "run/a: cannot read its log",
        )
        .to_string();
        assert_eq!(
            gone,
            "run/a: cannot read its log (404): runs.kruntimes.io \"a\" not found"
        );
    }
}
