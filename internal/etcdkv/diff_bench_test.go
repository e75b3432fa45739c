package etcdkv

import (
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// benchValues are node records of about 200 B and 600 B, as the live
// rows of bench/compare write them; TS is the status timestamp, PATCH
// (in 600B-two only) the version's patch.
var benchValues = []struct{ name, value string }{
	{"200B", `{"id":"metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51","roles":{"kubernetes_worker":{}},` +
		`"status":{"external_address":"10.17.201.33","timestamp":"TS"},"state":"NODE_STATE_UP"}`},
	{"600B", bench600B},
	{"600B-two", strings.Replace(bench600B, `"patch":"1"`, `"patch":"PATCH"`, 1)},
}

// bench600B is the record of about 600 B.
const bench600B = `{"id":"metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51","roles":{"kubernetes_worker":{}},` +
	`"status":{"external_address":"10.17.201.33","timestamp":"TS","version":{"release":{"minor":"1","patch":"1"},` +
	`"git_information":{"commit_hash":"753562701bd32d3c5a0237a3602e2f75def7b134","build_tree_state":"BUILD_TREE_STATE_CLEAN"}},` +
	`"boot_id":"eHxZTtLKNau3v4FjU6UIfA=="},"clusternet":{"wireguard_pubkey":"POFOXtBtNRZtQdAXCzWggk9so1WGmKrePt++4JWDO70=",` +
	`"prefixes":[{"cidr":"10.17.201.33/32"},{"cidr":"10.128.1.0/24"}]},"state":"NODE_STATE_UP",` +
	`"labels":{"pairs":[{"key":"topology.kubernetes.io/zone","value":"zone-a"}]}}`

// BenchmarkDiffKeyValue diffs two states of a key as key prints them (its
// Doc, the value indexed), a node record whose heartbeat moved: what the
// encoder does for every update it prints. The records are those of
// bench/compare's shapes: a bare record of about 200 B, and one of about
// 600 B whose status holds more after the heartbeat; and the 600 B one
// with its version's patch changed too (PATCH), two values of one inner
// object apart.
//
//	go test -run '^$' -bench DiffKeyValue ./internal/etcdkv
func BenchmarkDiffKeyValue(b *testing.B) {
	for _, c := range benchValues {
		b.Run(c.name, func(b *testing.B) {
			kv := func(ts string, rev int64) *mvccpb.KeyValue {
				v := strings.Replace(c.value, "TS", ts, 1)
				v = strings.Replace(v, "PATCH", fmt.Sprint(rev%7), 1)
				return &mvccpb.KeyValue{Key: []byte("/nodes/metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51"),
					Value: []byte(v), CreateRevision: 2, ModRevision: rev, Version: rev - 1}
			}
			prev, err := Object(kv("2026-11-24T10:31:13Z", 10), ValueAuto, nil)
			if err != nil {
				b.Fatal(err)
			}
			obj, err := Object(kv("2026-11-24T10:31:14Z", 11), ValueAuto, nil)
			if err != nil {
				b.Fatal(err)
			}
			var d jsondoc.Differ
			want := 3 // mod_revision, the timestamp, version
			if strings.Contains(c.value, "PATCH") {
				want++
			}
			if n := len(d.Diff(prev, obj)); n != want {
				b.Fatalf("%d paths", n)
			}
			b.ReportAllocs()
			for b.Loop() {
				d.Diff(prev, obj)
			}
		})
	}
}

// BenchmarkObjectFrom is the watcher's decode of one change: a record
// made into the object it prints as, as ObjectFrom makes it, and freed
// again as the view frees what it lets go of.
func BenchmarkObjectFrom(b *testing.B) {
	for _, c := range benchValues {
		if strings.Contains(c.value, "PATCH") {
			continue // the same decode as 600B
		}
		b.Run(c.name, func(b *testing.B) {
			kv := &mvccpb.KeyValue{Key: []byte("/nodes/metropolis-7a3f09c2d41b88e05c6e1f2a9b3d4c51"),
				Value:          []byte(strings.Replace(c.value, "TS", "2026-11-24T10:31:13.000316760Z", 1)),
				CreateRevision: 1234567, ModRevision: 2345678, Version: 1111}
			b.SetBytes(int64(len(kv.Value)))
			b.ReportAllocs()
			for b.Loop() {
				d, err := ObjectFrom(kv, ValueAuto, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				d.Give()
				jsondoc.Free(d)
			}
		})
	}
}
