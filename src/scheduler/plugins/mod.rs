//! The scheduler plugins, one file each; the file name is the plugin's registry key in
//! snake_case. Each exposes `NAME`, its bounded reason constants and its table-driven tests.
//!
//! Plugins read the snapshot and the Run's prepared state; they must not patch Kubernetes
//! objects, mutate the index or the assumed cache, or choose a Pod.

pub mod least_loaded;
pub mod preferred_run_affinity;
pub mod run_affinity;
pub mod runtime_pod_availability;

pub use least_loaded::LeastLoaded;
pub use preferred_run_affinity::PreferredRunAffinity;
pub use run_affinity::RunAffinity;
pub use runtime_pod_availability::RuntimePodAvailability;
