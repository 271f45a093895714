#!/usr/bin/env bash
# Builds krew and validate-krew-manifest v0.4.3 from Go modules (sigs.k8s.io/krew) for the
# packaging tests and caches them outside the repository, keyed by version. Prints the cache
# directory on stdout. Re-running with the binaries present does nothing.
set -euo pipefail

KREW_VERSION=v0.4.3
cache_root=${KRUNTIMES_KREW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes}
out="$cache_root/krew-$KREW_VERSION"

if [[ -x "$out/krew" && -x "$out/validate-krew-manifest" ]]; then
  echo "$out"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is not on PATH; it is needed to build krew $KREW_VERSION for the packaging tests" >&2
  exit 1
fi
mkdir -p "$out"
echo "building krew and validate-krew-manifest $KREW_VERSION into $out" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS= go install -trimpath \
    "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION" || {
  echo "error: building krew $KREW_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
  exit 1
}
mv "$tmp/krew" "$tmp/validate-krew-manifest" "$out/"
echo "$out"
