//! Prometheus text rendering, shared by the scheduler's and runtimed's `/metrics`.
//!
//! Owns only the encoding; each component owns its metric names and label sets (the
//! scheduler's and runtimed's `metrics` modules), and nothing here reads them.

use prometheus::{Encoder, Registry, TextEncoder};

/// Renders `registry` in the Prometheus text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}
