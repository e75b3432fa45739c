package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// BenchmarkKeyOnce100k: `nodewatch key --prefix /b/ --once` over 100,000
// keys with JSON values in a real (embedded) etcd: paged list at one
// revision, follower, encoder, to a discarding stdout. Reports keys/s.
func BenchmarkKeyOnce100k(b *testing.B) {
	const n = 100_000
	ep := etcdtest.Start(b)
	c := etcdtest.Client(b, ep)
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		ops := make([]clientv3.Op, 0, 100)
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/b/%06d", j), fmt.Sprintf(`{"state":"UP","n":%d}`, j)))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var stderr strings.Builder
		if code := run(ctx, []string{"key", "--etcd", ep, "--prefix", "/b/", "--once"}, strings.NewReader(""), io.Discard, &stderr); code != 0 {
			b.Fatalf("exit %d: %s", code, stderr.String())
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}
