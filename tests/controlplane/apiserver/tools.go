//go:build tools

// Package tools pins the Kubernetes main packages the project builds (the test control plane,
// kube-scheduler for the side-by-side benchmark, and kubelet and kube-controller-manager for
// the single-node cluster) so `go mod tidy` records their dependencies; it is never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
