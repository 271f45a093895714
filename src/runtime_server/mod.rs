//! The kruntimes Runtime Server contract's generated gRPC code (`proto/executor/v1/runtime.proto`,
//! package `executor.v1`, compiled by build.rs): its messages, the `Runtime` and
//! `FunctionRuntime` clients (runtimed's side, `crate::runtimed::remote`) and their server
//! traits (the tests' runtime server implements them). Nothing else lives here: how a Run maps
//! onto the wire is `crate::runtimed::contract`'s.

/// The code generated from the contract (package `executor.v1`): messages, the `Runtime` and
/// `FunctionRuntime` clients, and their server traits (the tests' runtime server implements
/// them).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("executor.v1");
}
