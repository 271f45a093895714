#!/usr/bin/env bash
# Builds kubelet and kube-controller-manager (the node and controller half of the single-node cluster) from the same
# Go module and release as the test control plane, after the control plane itself, and caches them beside it, keyed by
# version. Prints the cache directory on stdout. Re-running with the binaries present does nothing.
set -euo pipefail

K8S_VERSION=v1.36.3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(bash "$here/../controlplane/build.sh")

export CGO_ENABLED=0 GOFLAGS=-mod=mod
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

for component in kubelet kube-controller-manager; do
  if [[ ! -x "$out/$component" ]]; then
    echo "building $component $K8S_VERSION into $out (a cold build takes minutes)" >&2
    (cd "$here/../controlplane/apiserver" && go build -trimpath -ldflags "$ldflags" \
        -o "$out/$component.tmp" "k8s.io/kubernetes/cmd/$component") || {
      echo "error: building $component $K8S_VERSION failed; check that the Go module proxy ($(go env GOPROXY)) is reachable" >&2
      exit 1
    }
    mv "$out/$component.tmp" "$out/$component"
  fi
done

echo "$out"
