#!/usr/bin/env bash
# Builds helm v4.3.2 from Go modules (helm.sh/helm/v4) for tests/helm.rs and caches it outside the
# repository, keyed by version. Prints the cache directory on stdout. Re-running with the binary
# present does nothing.
set -euo pipefail

HELM_VERSION=v4.3.2
cache_root=${KRUNTIMES_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes}
out="$cache_root/helm-$HELM_VERSION"

if [[ -x "$out/helm" ]]; then
  echo "$out"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is not on PATH; it is needed to build helm $HELM_VERSION for tests/helm.rs" >&2
  exit 1
fi
mkdir -p "$out"
echo "building helm $HELM_VERSION into $out (a few minutes the first time)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS= go install -trimpath "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" || {
  echo "error: building helm $HELM_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
  exit 1
}
mv "$tmp/helm" "$out/"
echo "$out"
