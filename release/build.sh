#!/usr/bin/env bash
# Builds the release of kubectl-kruntimes: per platform a static (Linux) binary packed as
# kubectl-kruntimes-<os>-<arch>.tar.gz (binary, completion hook kubectl_complete-kruntimes,
# LICENSE), then over every archive in OUT_DIR: SHA256SUMS, per archive the SPDX SBOM of the
# crates its binary is built from (kubectl-kruntimes-<os>-<arch>.spdx.json) and the krew
# manifest kruntimes.yaml
# (krew/kruntimes.yaml with the version, URLs and sha256 of the archives). The release workflow
# (.github/workflows/release.yml) runs it per platform, then with `--collect` once; the tests
# run it for the Linux target of this machine.
#
#   release/build.sh [-o OUT_DIR] [--target TRIPLE]... [--profile PROFILE]
#   release/build.sh [-o OUT_DIR] --collect
#
#   --target TRIPLE   x86_64/aarch64-unknown-linux-gnu (static: glibc with crt-static, rustls,
#                     built in target/static as tests/cluster/static.sh builds) or
#                     x86_64/aarch64-apple-darwin. Default: this machine's Linux target.
#   --profile P       the cargo profile (default release; the tests use dev).
#   --collect         build nothing: write SHA256SUMS, the SBOM and the krew manifest for the
#                     archives already in OUT_DIR (the workflow's last step).
#   RELEASE_URL       where the archives are published (default: this project's GitHub
#                     release of the version, from Cargo.toml's `repository`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

out=dist
profile=release
collect=0
targets=()
usage="usage: release/build.sh [-o OUT_DIR] [--target TRIPLE]... [--profile PROFILE] | [-o OUT_DIR] --collect"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --collect) collect=1; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "error: unknown argument $1; $usage" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -1)
release_url=${RELEASE_URL:-$repository/releases/download/v$version}

# os-arch of a Rust target triple, in krew's words.
platform_of() {
  local os arch
  case "$1" in
    *-unknown-linux-gnu) os=linux ;;
    *-apple-darwin) os=darwin ;;
    *) echo "error: no release platform for target $1 (x86_64/aarch64 -unknown-linux-gnu or -apple-darwin)" >&2; return 1 ;;
  esac
  case "$1" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) echo "error: no release architecture for target $1" >&2; return 1 ;;
  esac
  echo "$os-$arch"
}

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# Run from `cargo test`, the environment carries the test's own CARGO_MANIFEST_DIR, CARGO_PKG_*…;
# some build scripts (ring's) rerun when one of them changes, so builds from a shell and from the
# tests would rebuild each other. Clear them (as tests/cluster/static.sh does).
for var in $(compgen -e); do
  case $var in
    CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_* | CARGO_BIN_* | CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR) unset "$var" ;;
  esac
done

build() { # build TARGET -> prints the binary's path
  local target=$1 dir=$profile
  [[ $profile == dev ]] && dir=debug
  case "$target" in
    *-linux-gnu)
      # With an explicit --target, RUSTFLAGS reach only the target's crates, not build scripts.
      RUSTFLAGS="-C target-feature=+crt-static" "${CARGO:-cargo}" build --quiet --locked \
        --profile "$profile" --target "$target" --target-dir "$repo/target/static" \
        --bin kubectl-kruntimes >&2
      echo "$repo/target/static/$target/$dir/kubectl-kruntimes" ;;
    *)
      "${CARGO:-cargo}" build --quiet --locked --profile "$profile" --target "$target" \
        --bin kubectl-kruntimes >&2
      echo "$repo/target/$target/$dir/kubectl-kruntimes" ;;
  esac
}

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
  echo "built $archive" >&2
}

if [[ $collect == 0 ]]; then
  if [[ ${#targets[@]} -eq 0 ]]; then
    case "$(uname -s)-$(uname -m)" in
      Linux-x86_64) targets=(x86_64-unknown-linux-gnu) ;;
      Linux-aarch64) targets=(aarch64-unknown-linux-gnu) ;;
      *) echo "error: name the targets with --target on $(uname -s) $(uname -m)" >&2; exit 2 ;;
    esac
  fi
  for target in "${targets[@]}"; do
    platform=$(platform_of "$target")
    echo "building kubectl-kruntimes $version for $target ($profile)" >&2
    package "$(build "$target")" "$platform"
  done
fi

shopt -s nullglob
archives=("$out"/kubectl-kruntimes-*.tar.gz)
if [[ ${#archives[@]} -eq 0 ]]; then
  echo "error: no kubectl-kruntimes-*.tar.gz in $out" >&2
  exit 1
fi
: >"$out/SHA256SUMS"
sums=()
for archive in "${archives[@]}"; do
  sum=$(sha256 "$archive")
  echo "$sum  ${archive##*/}" >>"$out/SHA256SUMS"
  sums+=("${archive##*/}=$sum")
done

# One SBOM per archive: the crates of that target's binary (a Linux binary has no macOS crate).
sboms=()
for archive in "${archives[@]}"; do
  name=${archive##*/}
  platform=${name#kubectl-kruntimes-}
  platform=${platform%.tar.gz}
  case "$platform" in
    linux-amd64) target=x86_64-unknown-linux-gnu ;;
    linux-arm64) target=aarch64-unknown-linux-gnu ;;
    darwin-amd64) target=x86_64-apple-darwin ;;
    darwin-arm64) target=aarch64-apple-darwin ;;
    *) echo "error: $name is no release archive (kubectl-kruntimes-OS-ARCH.tar.gz)" >&2; exit 1 ;;
  esac
  python3 release/sbom.py "$version" "$repository" "$target" >"$out/kubectl-kruntimes-$platform.spdx.json"
  sboms+=("kubectl-kruntimes-$platform.spdx.json")
done

joined=$(IFS=,; echo "${sums[*]}")
awk -v ver="v$version" -v url="$release_url" -v home="$repository" -v sums="$joined" '
  BEGIN {
    n = split(sums, pairs, ",")
    for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); sum[kv[1]] = kv[2] }
  }
  /^  version: / { print "  version: " ver; next }
  /^  homepage: / { print "  homepage: " home; next }
  /^      uri: / { file = $2; sub(/.*\//, "", file); current = file; print "      uri: " url "/" file; next }
  /^      sha256: / { if (current in sum) print "      sha256: \"" sum[current] "\""; else print; next }
  { print }
' krew/kruntimes.yaml >"$out/kruntimes.yaml"
echo "wrote $out/SHA256SUMS, ${sboms[*]} and $out/kruntimes.yaml (v$version)" >&2
