//go:build tools

// Package tools pins the etcd binaries make bench-compare builds.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
