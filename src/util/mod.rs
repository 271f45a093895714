//! Small helpers every room may use, owning no state and no policy of kruntimes': SHA-256
//! digests ([`digest`]), Kubernetes-style durations ([`duration`]), YAML documents ([`yaml`]),
//! child processes and their process groups ([`process`]), the termination signals
//! ([`signals`]) and the allocator's freed memory ([`memory`]). Nothing here imports another module of the crate.

pub mod digest;
pub mod duration;
pub mod memory;
pub mod process;
pub mod signals;
pub mod yaml;
