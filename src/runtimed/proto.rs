//! The kruntimes Runtime Server contract's generated gRPC code (`proto/executor/v1/runtime.proto`,
//! package `executor.v1`, compiled by build.rs): its messages, the `Runtime` and
//! `FunctionRuntime` clients (runtimed's side, [`super::remote`]) and their server traits (the
//! tests' runtime server implements them). Nothing else lives here: how a Run maps onto the
//! wire is [`super::contract`]'s.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

tonic::include_proto!("executor.v1");
