//! Generates the runtime contract's gRPC code (`proto/executor/v1/runtime.proto`, package
//! `executor.v1`) into OUT_DIR for `src/runtime_server`: messages, the `Runtime` and
//! `FunctionRuntime` clients and server traits. Pure Rust: protox parses the file, so no
//! `protoc` is needed on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/executor/v1/runtime.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
