//go:build tools

// Package tools pins the etcd server main package so `go mod tidy` records its
// dependencies; it is never compiled.
package tools

import _ "go.etcd.io/etcd/server/v3"
