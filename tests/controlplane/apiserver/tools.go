//go:build tools

// Package tools pins the kube-apiserver main package so `go mod tidy` records its
// dependencies; it is never compiled.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
