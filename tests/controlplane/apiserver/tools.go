//go:build tools

// Package tools pins the kube-apiserver and kubectl main packages so `go mod tidy` records
// their dependencies; it is never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
