#!/usr/bin/env bash
# Builds Go commands from their modules, at one version, for the tests, and caches them outside
# the repository in CACHE/NAME-VERSION (CACHE: $KRUNTIMES_GO_TOOLS_CACHE, else
# ${XDG_CACHE_HOME:-~/.cache}/kruntimes). Prints that directory on stdout; with every command
# already there it builds nothing.
#
#   tests/go-install.sh NAME VERSION PACKAGE...   (PACKAGE: a main package, e.g. helm.sh/helm/v4/cmd/helm)
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: tests/go-install.sh NAME VERSION PACKAGE..." >&2
  exit 2
fi
name=$1 version=$2
shift 2
cache_root=${KRUNTIMES_GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes}
out="$cache_root/$name-$version"

commands=()
missing=0
for package in "$@"; do
  commands+=("${package##*/}")
  [[ -x "$out/${package##*/}" ]] || missing=1
done
if [[ $missing == 0 ]]; then
  echo "$out"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is not on PATH; it is needed to build ${commands[*]} $version for the tests" >&2
  exit 1
fi
mkdir -p "$out"
echo "building ${commands[*]} $version into $out (minutes the first time)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS= go install -trimpath "${@/%/@$version}" || {
  echo "error: building ${commands[*]} $version failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
  exit 1
}
for command in "${commands[@]}"; do
  mv "$tmp/$command" "$out/"
done
echo "$out"
