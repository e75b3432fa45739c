//go:build linux

package faults

import (
	"bytes"
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// Marker matches a nodewatch event (new or updated) that holds the
// marker value v.
func Marker(v string) func([]byte) bool {
	quoted := []byte(strconv.Quote(v))
	return func(line []byte) bool {
		return bytes.Contains(line, quoted) &&
			(bytes.HasPrefix(line, []byte(`{"type":"new"`)) || bytes.HasPrefix(line, []byte(`{"type":"updated"`)))
	}
}

// MarkerKey and MarkerNode are what a measurement writes after a fault:
// a key under KeyPrefix and a node record, in one transaction, both
// holding the measurement's marker value.
const (
	MarkerKey   = KeyPrefix + "marker"
	MarkerNode  = "fault-marker"
	markerLabel = "nodewatch.faults/marker"
)

// markerWriter returns what writes the marker value v after a fault:
// value at MarkerKey and a node record labelled v at MarkerNode, in one
// transaction, tried again until etcd acknowledges it or ctx ends.
func (r *run) markerWriter(v, value string) func(ctx context.Context) {
	record, err := curator.EncodeRecord(&apipb.Node{Id: MarkerNode, Labels: &commonpb.NodeLabels{
		Pairs: []*commonpb.NodeLabels_Pair{{Key: markerLabel, Value: v}},
	}})
	if err != nil {
		r.t.Fatal(err)
	}
	return func(ctx context.Context) {
		for ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := r.client.Txn(wctx).Then(
				clientv3.OpPut(MarkerKey, value),
				clientv3.OpPut(curator.DefaultPrefix+MarkerNode, string(record)),
			).Commit()
			cancel()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
