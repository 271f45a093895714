//! What the long-running processes tell their operators: Kubernetes Events ([`events`]),
//! Prometheus metrics and the API client's request metrics ([`metrics`]), logs ([`logging`]),
//! and the HTTP endpoints that serve metrics and probes ([`http`], with `/metrics` behind
//! TLS and the API server's authorisation in [`http::secure`]). It decides nothing about Runs.

pub mod events;
pub mod http;
pub mod logging;
pub mod metrics;
