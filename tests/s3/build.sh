#!/usr/bin/env bash
# Builds s3s-fs v0.14.1 (crate s3s-fs, the s3s project's S3 server over a directory: the real
# S3 REST protocol with SigV4 authentication, multipart uploads and listings) for the tests of
# runtimed's S3 artifact store, cached by version outside the repository in
# ${KRUNTIMES_GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kruntimes}/s3s-fs-v0.14.1. Prints that
# directory on stdout; with the binary already there it builds nothing.
set -euo pipefail
version=0.14.1
cache_root=${KRUNTIMES_GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes}
out="$cache_root/s3s-fs-v$version"
if [[ -x "$out/s3s-fs" ]]; then
  echo "$out"
  exit 0
fi
echo "building s3s-fs $version into $out (a minute or two the first time)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo install --quiet --locked --features binary --version "$version" --root "$tmp" s3s-fs >&2 || {
  echo "error: building s3s-fs $version failed; check that crates.io is reachable" >&2
  exit 1
}
mkdir -p "$out"
mv "$tmp/bin/s3s-fs" "$out/"
echo "$out"
