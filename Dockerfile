# The kruntimes image: one static kubectl-kruntimes (glibc with crt-static, rustls; no libc,
# no shell, no CA bundle needed: it talks only to the API server, with the service account's
# CA) on an empty base, as a non-root numeric user. The scheduler Deployment runs it
# (deploy/scheduler.yaml) and Runtime Pods of any image get its binary from it (an init
# container copies /kubectl-kruntimes into an emptyDir; docs/operations/runtime-pods.md).
#
#   docker build -t REGISTRY/kubectl-kruntimes:0.1.0 .
#
# Without a daemon or registry, tests/cluster/oci.py writes the same image (same binary path,
# entrypoint, user and labels) as an OCI archive from tests/cluster/static.sh's build.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked \
      --target "$(uname -m)-unknown-linux-gnu" --bin kubectl-kruntimes \
 && cp "target/$(uname -m)-unknown-linux-gnu/release/kubectl-kruntimes" /kubectl-kruntimes

FROM scratch
LABEL org.opencontainers.image.title="kubectl-kruntimes" \
      org.opencontainers.image.description="A scheduler for logical resources on Kubernetes: the scheduler, runtimed and the kubectl plugin in one static binary." \
      org.opencontainers.image.source="https://github.com/kruntimes/kubectl-kruntimes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
COPY --from=build /kubectl-kruntimes /kubectl-kruntimes
USER 65532:65532
ENTRYPOINT ["/kubectl-kruntimes"]
