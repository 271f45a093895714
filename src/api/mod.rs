//! The kruntimes API: custom resource types, logical resource parsing and status helpers.

pub mod resources;
pub mod status;
pub mod types;

pub use resources::{ResourceError, Resources};
pub use types::*;

/// Label on Runtime Pods naming their Runtime.
pub const LABEL_RUNTIME: &str = "kruntimes.io/runtime";
/// Label on Runtime Pods naming the Pod itself; the only affinity topology key.
pub const LABEL_RUNTIME_POD: &str = "kruntimes.io/runtime-pod";
/// Field manager for every write kruntimes makes.
pub const FIELD_MANAGER: &str = "kubectl-kruntimes";
