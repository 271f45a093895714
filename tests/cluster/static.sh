#!/usr/bin/env bash
# Builds the static kubectl-kruntimes of the container image (glibc, `-C target-feature=+crt-static`, rustls) into
# its own target directory, target/static, so it never invalidates the ordinary build, and prints its path.
# Profile: KRUNTIMES_STATIC_PROFILE (default `dev`, which tests use; the Dockerfile builds `release`).
# `static.sh kruntimes-test-runtime-server` builds the tests' runtime server instead (feature
# `testing`), for the cluster's runtime-server image.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
profile=${KRUNTIMES_STATIC_PROFILE:-dev}
target=x86_64-unknown-linux-gnu
# Run from `cargo test`, the environment carries the test's own CARGO_MANIFEST_DIR, CARGO_PKG_*…;
# some build scripts (ring's) rerun when one of them changes, so builds from a shell and from the
# tests would rebuild each other. Clear them.
for var in $(compgen -e); do
  case $var in
    CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_* | CARGO_BIN_* | CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR) unset "$var" ;;
  esac
done
# With an explicit --target, RUSTFLAGS reach only the target's crates, not build scripts or proc macros.
bin=${1:-kubectl-kruntimes}
features=()
[[ $bin == kubectl-kruntimes ]] || features=(--features testing)
# Not incremental: this tree is rebuilt for images, not edited against, and its incremental
# state was half of target/static (5.5 of 10 GiB).
CARGO_INCREMENTAL=0 RUSTFLAGS="-C target-feature=+crt-static" "${CARGO:-cargo}" build --quiet --locked --profile "$profile" \
  --target "$target" --target-dir "$repo/target/static" --bin "$bin" "${features[@]}" --manifest-path "$repo/Cargo.toml" >&2
dir=$profile
[[ $profile == dev ]] && dir=debug
echo "$repo/target/static/$target/$dir/$bin"
