// Package etcdtest is test scaffolding that gives tests a real etcd: an
// embedded server in a temporary directory, clients for it, a TCP proxy
// that can cut a client off and let it back, so reconnects and compactions
// can be provoked on purpose, and a multi-member cluster.
package etcdtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Start starts an embedded etcd that lives as long as the test and
// returns its client URL.
func Start(t testing.TB) string {
	t.Helper()
	s, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Endpoint
}

// StartTLS starts an embedded etcd that serves clients TLS only, as tls
// says, for as long as the test; it returns its https:// client URL.
func StartTLS(t testing.TB, tls embedetcd.TLS) string {
	t.Helper()
	s, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), TLS: &tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Endpoint
}

// StartWith starts an embedded etcd as Start does, puts kv (a key, its
// value, the next key, …) in that order, and returns its client URL and a
// client for it (see Client).
func StartWith(t testing.TB, kv ...string) (string, *clientv3.Client) {
	t.Helper()
	if len(kv)%2 != 0 {
		t.Fatalf("StartWith: key %q has no value", kv[len(kv)-1])
	}
	url := Start(t)
	c := Client(t, url)
	for i := 0; i < len(kv); i += 2 {
		Put(t, c, kv[i], kv[i+1])
	}
	return url, c
}

// Client returns a client for endpoint (several: comma-separated), closed
// when the test ends.
func Client(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoint, ","), DialTimeout: testkit.Timeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Put writes key=value and returns the new revision.
func Put(t testing.TB, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	resp, err := c.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return resp.Header.Revision
}

// Delete deletes key and returns the new revision.
func Delete(t testing.TB, c *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	resp, err := c.Delete(ctx, key)
	if err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	return resp.Header.Revision
}

// Get returns the keys under prefix, without it, and their values.
func Get(t testing.TB, c clientv3.KV, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("get %q: %v", prefix, err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = string(kv.Value)
	}
	return out
}

// PutRetrying puts key=value, retrying while a cluster elects a leader,
// and returns the new revision.
func PutRetrying(t testing.TB, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	var rev int64
	err := testkit.Poll(context.Background(), testkit.Timeout, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := c.Put(ctx, key, value)
		if err != nil {
			return false, err
		}
		rev = resp.Header.Revision
		return true, nil
	})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return rev
}

// Compact compacts the history up to rev and waits until it is gone.
func Compact(t testing.TB, c *clientv3.Client, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact at rev %d: %v", rev, err)
	}
}

// EnableAuth creates the root user with password rootPassword and turns
// authentication on; c keeps working as it was until it reconnects.
func EnableAuth(t testing.TB, c *clientv3.Client, rootPassword string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := c.UserAdd(ctx, "root", rootPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

// RandomOps returns the operations of one random transaction over the keys
// PREFIXk0 … PREFIXk(keys-1): one to four of them, each deleted one time
// in deleteOneIn, else put to value().
func RandomOps(rng *rand.Rand, prefix string, keys, deleteOneIn int, value func() string) []clientv3.Op {
	var ops []clientv3.Op
	for _, k := range rng.Perm(keys)[:1+rng.IntN(min(4, keys))] {
		key := fmt.Sprintf("%sk%d", prefix, k)
		if rng.IntN(deleteOneIn) == 0 {
			ops = append(ops, clientv3.OpDelete(key))
		} else {
			ops = append(ops, clientv3.OpPut(key, value()))
		}
	}
	return ops
}
