//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// The source's real state, read from etcd with a linearizable read, in
// the form a stream's replay is compared with.

// Keys returns the keys under prefix (prefix alone when single) as `key`
// prints their objects (--value auto), by id.
func Keys(ctx context.Context, c *clientv3.Client, prefix string, single bool) (map[string]any, error) {
	var opts []clientv3.OpOption
	if !single {
		opts = append(opts, clientv3.WithPrefix())
	}
	resp, err := c.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", prefix, err)
	}
	want := map[string]any{}
	for _, kv := range resp.Kvs {
		obj, err := etcdkv.Object(kv, etcdkv.ValueAuto, nil)
		if err != nil {
			return nil, err
		}
		want[string(kv.Key)] = json.RawMessage(obj.JSON())
	}
	return want, nil
}

// Nodes returns the node records under curator.DefaultPrefix as `nodes`
// prints their objects, by id; only the node id when id is not "".
func Nodes(ctx context.Context, c *clientv3.Client, id string) (map[string]json.RawMessage, error) {
	key, opts := curator.DefaultPrefix, []clientv3.OpOption{clientv3.WithPrefix()}
	if id != "" {
		key, opts = key+id, nil
	}
	resp, err := c.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	want := map[string]json.RawMessage{}
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), curator.DefaultPrefix)
		n, err := curator.DecodeRecord(id, kv.Value)
		if err != nil {
			return nil, fmt.Errorf("record %q: %w", kv.Key, err)
		}
		obj, err := curator.Object(n)
		if err != nil {
			return nil, fmt.Errorf("record %q: %w", kv.Key, err)
		}
		want[id] = obj.JSON()
	}
	return want, nil
}

// anyMap returns m with values as any, for replay.Checker.Equal.
func anyMap(m map[string]json.RawMessage) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
