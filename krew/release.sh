#!/usr/bin/env bash
# Builds the krew release archives of kubectl-kruntimes and writes the krew manifest that
# points at them.
#
#   krew/release.sh [-o OUT_DIR] [--binary PATH] [--target TRIPLE]...
#
# For each platform, OUT_DIR (default: dist) gets kubectl-kruntimes-<os>-<arch>.tar.gz
# holding the binary, the completion hook kubectl_complete-kruntimes and LICENSE; then
# OUT_DIR/kruntimes.yaml is krew/kruntimes.yaml with the version of Cargo.toml, the archive
# URLs under $RELEASE_URL and the sha256 of every archive built.
#
#   --target TRIPLE  build with `cargo build --release --target TRIPLE` (repeatable; the Rust
#                    target and its linker must be installed). Default: the host.
#   --binary PATH    package this already built binary for the host platform instead of
#                    building one (the tests use it to skip a release build).
#   RELEASE_URL      where the archives are published
#                    (default: https://github.com/kruntimes/kruntimes/releases/download/v<version>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=dist
binary=
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    *) echo "error: unknown argument $1; usage: krew/release.sh [-o OUT_DIR] [--binary PATH] [--target TRIPLE]..." >&2; exit 2 ;;
  esac
done
if [[ -n "$binary" && ${#targets[@]} -gt 0 ]]; then
  echo "error: --binary packages the host's binary; it cannot be combined with --target" >&2
  exit 2
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
release_url=${RELEASE_URL:-https://github.com/kruntimes/kruntimes/releases/download/v$version}

# os/arch of a Rust target triple, in krew's words.
platform_of() {
  local os arch
  case "$1" in
    *-linux-*) os=linux ;;
    *-apple-darwin) os=darwin ;;
    *) echo "error: no krew platform for target $1" >&2; return 1 ;;
  esac
  case "$1" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) echo "error: no krew architecture for target $1" >&2; return 1 ;;
  esac
  echo "$os-$arch"
}

host_platform() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) echo "error: unsupported host OS $(uname -s)" >&2; return 1 ;;
  esac
  case "$(uname -m)" in
    x86_64|amd64) arch=amd64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) echo "error: unsupported host architecture $(uname -m)" >&2; return 1 ;;
  esac
  echo "$os-$arch"
}

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

mkdir -p "$out"
sums=()
package() { # package BINARY PLATFORM
  local bin=$1 platform=$2 stage archive
  stage=$(mktemp -d)
  cp "$bin" "$stage/kubectl-kruntimes"
  cp completions/kubectl_complete-kruntimes LICENSE "$stage/"
  chmod 0755 "$stage/kubectl-kruntimes" "$stage/kubectl_complete-kruntimes"
  chmod 0644 "$stage/LICENSE"
  archive="$out/kubectl-kruntimes-$platform.tar.gz"
  # Reproducible: fixed order, owner and time; gzip without a timestamp.
  if tar --version 2>/dev/null | grep -q GNU; then
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
      -cf - kubectl-kruntimes kubectl_complete-kruntimes LICENSE | gzip -n -9 >"$archive"
  else
    tar -C "$stage" -cf - kubectl-kruntimes kubectl_complete-kruntimes LICENSE | gzip -n -9 >"$archive"
  fi
  rm -rf "$stage"
  sums+=("kubectl-kruntimes-$platform.tar.gz=$(sha256 "$archive")")
  echo "built $archive" >&2
}

if [[ -n "$binary" ]]; then
  package "$binary" "$(host_platform)"
elif [[ ${#targets[@]} -eq 0 ]]; then
  cargo build --release --locked
  package target/release/kubectl-kruntimes "$(host_platform)"
else
  for target in "${targets[@]}"; do
    platform=$(platform_of "$target")
    cargo build --release --locked --target "$target"
    package "target/$target/release/kubectl-kruntimes" "$platform"
  done
fi

joined=$(IFS=,; echo "${sums[*]}")
awk -v ver="v$version" -v url="$release_url" -v sums="$joined" '
  BEGIN {
    n = split(sums, pairs, ",")
    for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); sum[kv[1]] = kv[2] }
  }
  /^  version: / { print "  version: " ver; next }
  /^      uri: / { file = $2; sub(/.*\//, "", file); current = file; print "      uri: " url "/" file; next }
  /^      sha256: / { if (current in sum) print "      sha256: \"" sum[current] "\""; else print; next }
  { print }
' krew/kruntimes.yaml >"$out/kruntimes.yaml"
echo "wrote $out/kruntimes.yaml (version v$version)" >&2
