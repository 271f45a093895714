//go:build tools

// Package tools pins the one Kubernetes main package built from this module, kube-apiserver
// v1.32.13 (the compatibility suite uses the newer kubectl), so `go mod tidy` records its
// dependencies; it is never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
