package etcdkv

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// BenchmarkDiffKeyValue diffs two states of a key as key prints them (its
// Doc, the value indexed), a small node record whose heartbeat moved: what
// the encoder does for every update it prints.
//
//	go test -run '^$' -bench DiffKeyValue ./internal/etcdkv
func BenchmarkDiffKeyValue(b *testing.B) {
	kv := func(ts string, rev int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("/nodes/metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51"),
			Value: []byte(`{"id":"metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51","roles":{"kubernetesWorker":{}},"state":"NODE_STATE_UP",` +
				`"status":{"externalAddress":"10.17.201.33","timestamp":"` + ts + `"}}`),
			CreateRevision: 2, ModRevision: rev, Version: rev - 1}
	}
	prev, err := Object(kv("2026-11-24T10:31:13.000000001Z", 10), ValueAuto, nil)
	if err != nil {
		b.Fatal(err)
	}
	obj, err := Object(kv("2026-11-24T10:31:14.000000001Z", 11), ValueAuto, nil)
	if err != nil {
		b.Fatal(err)
	}
	var d jsondoc.Differ
	if n := len(d.Diff(prev, obj)); n != 3 {
		b.Fatalf("%d paths", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		d.Diff(prev, obj)
	}
}
