//! What the object builders share: the namespace, Runtime and fixed [`NOW`] every object is
//! built at, the heartbeat constants, label selectors, and the `setters!` macro.
//!
//! The builders are one file per kind: `run.rs`, `pod.rs` (Runtime Pods and their heartbeat
//! Leases), `runtime.rs`, `workspace.rs` and `priority_class.rs`. Every builder yields the
//! object as production would see it at [`NOW`]; integration tests create the same objects on
//! the real API server (`testkit/`), which assigns UIDs and takes the status through the
//! status subresource.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::scheduler::framework::Selector;

/// Builder methods that set one field: `name(args) => field = value;` becomes
/// `pub fn name(mut self, args) -> Self { self.field = value; self }`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty),*) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}
pub(super) use setters;

pub const NS: &str = "default";
pub const RUNTIME: &str = "python";
/// The fixed "now" of every unit test and bench.
pub const NOW: Timestamp = Timestamp::constant(1_700_000_000, 0);
/// A fresh heartbeat was renewed this many seconds before "now".
pub const FRESH_AGO: i64 = 5;
/// `leaseDurationSeconds` of a heartbeat, unless the caller says how long a fresh one holds.
pub const LEASE_SECONDS: i32 = 40;
/// The image of a Runtime Pod's `runtimed` container (nothing pulls it: there is no kubelet).
pub const RUNTIMED_IMAGE: &str = "kruntimes.invalid/runtimed";

pub(super) fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn quantities<V: ToString>(pairs: &[(&str, V)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A `LabelSelector` of `(key, operator, values)` expressions.
pub fn label_selector(exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(
            exprs
                .iter()
                .map(|(key, op, values)| LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: op.to_string(),
                    values: (!values.is_empty())
                        .then(|| values.iter().map(|v| v.to_string()).collect()),
                })
                .collect(),
        ),
    }
}

/// A one-expression `LabelSelector`.
pub fn expr_selector(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    label_selector(&[(key, op, values)])
}

/// A compiled selector of `(key, operator, values)` expressions.
pub fn selector_expr(exprs: &[(&str, &str, &[&str])]) -> Selector {
    Selector::compile(&label_selector(exprs), "test").expect("valid test selector")
}

pub(super) fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(string_map(pairs)),
        match_expressions: None,
    }
}

/// The UID set on a builder, else `<prefix>-<name>`.
pub(super) fn uid_or_default(uid: &Option<String>, prefix: &str, name: &str) -> String {
    uid.clone().unwrap_or_else(|| format!("{prefix}-{name}"))
}

/// `NOW + seconds`.
pub fn at(seconds: i64) -> Timestamp {
    time_after_now(seconds)
}

pub(super) fn time_after_now(seconds: i64) -> Timestamp {
    NOW.checked_add(SignedDuration::from_secs(seconds))
        .expect("test time in range")
}
