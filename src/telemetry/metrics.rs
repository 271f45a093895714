//! Prometheus for every component: the text rendering shared by the scheduler's and runtimed's
//! `/metrics`, and the metrics an operator expects of any process, registered once per
//! process in [`common`]: build information, the process's own resources, and the API
//! client's requests (counted by [`ApiClientLayer`] on every client
//! [`crate::kubeclient::connect`] builds).
//!
//! Each component owns its own metric names and label sets (the scheduler's and runtimed's
//! `metrics` modules); nothing here reads them. Every label value here is bounded: HTTP
//! methods and status codes, never a path, object or user.

use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Renders `registry` and the process-wide [`common`] metrics in the Prometheus text format.
pub fn render(registry: &Registry) -> String {
    let mut families = registry.gather();
    families.extend(common().gather());
    let mut buf = Vec::new();
    let _ = TextEncoder::new().encode(&families, &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

/// Where a component registers its metrics: the Prometheus [`Registry`] it serves, or a
/// [`Catalog`] that only describes them (the generated metrics reference). Each component's
/// `register` takes a `Sink`, so the reference lists exactly what the code registers.
pub trait Sink {
    fn register(&self, collector: Box<dyn Collector>) -> prometheus::Result<()>;
}

impl Sink for Registry {
    fn register(&self, collector: Box<dyn Collector>) -> prometheus::Result<()> {
        Registry::register(self, collector)
    }
}

/// One metric as the reference describes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Described {
    pub name: String,
    /// `counter`, `gauge`, `histogram`, …
    pub kind: String,
    pub labels: Vec<String>,
    pub help: String,
}

/// A [`Sink`] that keeps the description of every metric registered with it.
#[derive(Default)]
pub struct Catalog {
    described: std::sync::Mutex<Vec<Described>>,
}

impl Catalog {
    /// What was registered, by name.
    pub fn into_described(self) -> Vec<Described> {
        let mut out = self
            .described
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        out.sort();
        out
    }
}

impl Sink for Catalog {
    fn register(&self, collector: Box<dyn Collector>) -> prometheus::Result<()> {
        // A family's type comes from collecting it (a vector with no series still says it).
        let kinds: std::collections::BTreeMap<String, String> = collector
            .collect()
            .iter()
            .map(|f| {
                (
                    f.name().to_string(),
                    format!("{:?}", f.get_field_type()).to_lowercase(),
                )
            })
            .collect();
        let mut described = self.described.lock().unwrap_or_else(|e| e.into_inner());
        for desc in collector.desc() {
            let mut labels: Vec<String> = desc
                .const_label_pairs
                .iter()
                .map(|l| l.name().to_string())
                .collect();
            labels.extend(desc.variable_labels.iter().cloned());
            described.push(Described {
                name: desc.fq_name.clone(),
                kind: kinds
                    .get(&desc.fq_name)
                    .cloned()
                    .unwrap_or_else(|| "untyped".into()),
                labels,
                help: desc.help.clone(),
            });
        }
        Ok(())
    }
}

/// The process-wide registry: `kruntimes_build_info`, the `process_*` metrics of this process
/// (CPU, memory, open file descriptors, start time) and the API client's.
pub fn common() -> &'static Registry {
    static COMMON: LazyLock<Registry> = LazyLock::new(|| {
        let registry = Registry::new();
        register_common(&registry);
        registry
    });
    &COMMON
}

/// Registers what [`common`] holds with `sink`.
pub fn register_common(registry: &impl Sink) {
    let info = crate::api::build::info();
    let build = IntGauge::with_opts(
        Opts::new(
            "kruntimes_build_info",
            "Always 1: the version, git commit and Rust version of this binary.",
        )
        .const_label("version", info.version)
        .const_label("git_commit", info.git_commit)
        .const_label("rust_version", info.rust_version),
    )
    .expect("a valid metric");
    build.set(1);
    let _ = registry.register(Box::new(build));
    let _ = registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ));
    let _ = registry.register(Box::new(API_REQUESTS.clone()));
    let _ = registry.register(Box::new(API_DURATION.clone()));
}

static API_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "kruntimes_api_client_requests_total",
            "Requests this process made to the Kubernetes API server, by HTTP method and status code (code \"error\": no response).",
        ),
        &["method", "code"],
    )
    .expect("a valid metric")
});

static API_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    HistogramVec::new(
        HistogramOpts::new(
            "kruntimes_api_client_request_duration_seconds",
            "Time until the Kubernetes API server's response headers (a watch: until it started), by HTTP method.",
        )
        .buckets(vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ]),
        &["method"],
    )
    .expect("a valid metric")
});

/// Every value of the `method` label.
pub const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "other"];

/// The bounded method label: the HTTP methods the client uses, else `other`.
fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        _ => "other",
    }
}

/// A tower layer that counts each request to the API server in the [`common`] metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiClientLayer;

impl<S> tower::Layer<S> for ApiClientLayer {
    type Service = ApiClientService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        // Registered at the first client, so a process's /metrics always has them.
        let _ = common();
        ApiClientService { inner }
    }
}

/// See [`ApiClientLayer`].
#[derive(Clone, Debug)]
pub struct ApiClientService<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for ApiClientService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let method = method_label(request.method());
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(r) => r.status().as_str().to_string(),
                Err(_) => "error".to_string(),
            };
            API_REQUESTS.with_label_values(&[method, &code]).inc();
            API_DURATION
                .with_label_values(&[method])
                .observe(started.elapsed().as_secs_f64());
            response
        })
    }
}
