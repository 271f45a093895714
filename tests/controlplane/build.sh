#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd, and a kubectl of the same release) and the kube-scheduler of the
# same release (the anchor of the side-by-side benchmark) from Go modules and caches the binaries outside the
# repository, keyed by version. Prints the cache directory on stdout.
# Re-running with the binaries present does nothing.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${KRUNTIMES_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes/controlplane}
out="$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kubectl" && -x "$out/kube-scheduler" ]]; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is not on PATH; it is needed to build kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION for the test control plane" >&2
  exit 1
fi

mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

if [[ ! -x "$out/kube-apiserver" ]]; then
  echo "building kube-apiserver $K8S_VERSION into $out (a cold build takes several minutes)" >&2
  (cd "$here/apiserver" && go build -trimpath -tags selinux,notest -ldflags "$ldflags" \
      -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver) || {
    echo "error: building kube-apiserver $K8S_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
    exit 1
  }
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi

if [[ ! -x "$out/kubectl" ]]; then
  echo "building kubectl $K8S_VERSION into $out" >&2
  (cd "$here/apiserver" && go build -trimpath -ldflags "$ldflags" \
      -o "$out/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl) || {
    echo "error: building kubectl $K8S_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
    exit 1
  }
  mv "$out/kubectl.tmp" "$out/kubectl"
fi

if [[ ! -x "$out/kube-scheduler" ]]; then
  echo "building kube-scheduler $K8S_VERSION into $out" >&2
  (cd "$here/apiserver" && go build -trimpath -ldflags "$ldflags" \
      -o "$out/kube-scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler) || {
    echo "error: building kube-scheduler $K8S_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
    exit 1
  }
  mv "$out/kube-scheduler.tmp" "$out/kube-scheduler"
fi

if [[ ! -x "$out/etcd" ]]; then
  echo "building etcd $ETCD_VERSION into $out" >&2
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3) || {
    echo "error: building etcd $ETCD_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
    exit 1
  }
  mv "$out/etcd.tmp" "$out/etcd"
fi

echo "$out"
