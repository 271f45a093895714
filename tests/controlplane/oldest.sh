#!/usr/bin/env bash
# Builds the oldest kube-apiserver kruntimes installs on (v1.32.13) for the compatibility suite
# (tests/it/kubernetes_1_32.rs) from Go modules (tests/controlplane/apiserver-v1.32), and caches it
# outside the repository, keyed by version, in a directory where etcd and kubectl are links to the
# current control plane's (tests/controlplane/build.sh): only kube-apiserver is older, so a cold
# run builds one Go command more. Prints the directory on stdout; re-running with the binary
# present builds nothing.
set -euo pipefail

K8S_VERSION=v1.32.13
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${KRUNTIMES_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes/controlplane}
out="$cache_root/k8s-$K8S_VERSION-apiserver"
current=$(bash "$here/build.sh")

mkdir -p "$out"
ln -sfn "$current/etcd" "$out/etcd"
ln -sfn "$current/kubectl" "$out/kubectl"

if [[ ! -x "$out/kube-apiserver" ]]; then
  echo "building kube-apiserver $K8S_VERSION into $out (a cold build takes several minutes)" >&2
  export CGO_ENABLED=0 GOFLAGS=-mod=mod
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=32"
  (cd "$here/apiserver-v1.32" && go build -trimpath -tags selinux,notest -ldflags "$ldflags" \
      -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver) || {
    echo "error: building kube-apiserver $K8S_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
    exit 1
  }
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi

echo "$out"
