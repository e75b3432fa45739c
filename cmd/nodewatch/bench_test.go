//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// BenchmarkKeyOnce100k: `nodewatch key --prefix /b/ --once` over 100,000
// keys with JSON values in a real (embedded) etcd: paged list at one
// revision, follower, encoder, to a discarding stdout. Reports keys/s.
func BenchmarkKeyOnce100k(b *testing.B) {
	const n = 100_000
	ep, c := etcdtest.StartWith(b)
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

// BenchmarkStalledHandlerMemory: the nodewatch binary with --exec over
// 1,000 keys, whose handler never returns from its first run, while
// changes keep coming (transactions of 50 puts to random keys). What
// nodewatch keeps meanwhile is one state per key: its resident memory
// must stay flat as the changes grow. Reports VmRSS after 20,000 and
// after 200,000 changes. Run with -benchtime 1x.
func BenchmarkStalledHandlerMemory(b *testing.B) {
	const keys, perTxn = 1000, 50
	ep, c := etcdtest.StartWith(b)
	ctx := context.Background()
	put := func(round int) {
		ops := make([]clientv3.Op, 0, perTxn)
		for j := 0; j < perTxn; j++ {
			k := (round*perTxn + j*7919) % keys
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/m/%04d", k), fmt.Sprintf(`{"state":"UP","round":%d,"pad":"%0200d"}`, round, j)))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	for r := 0; r < keys/perTxn; r++ {
		put(r)
	}
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		cmd := command(b, "key", "/m/", "--prefix", "--etcd", ep, "--exec", `touch "$DIR/started"; exec sleep 100000`)
		cmd.Env = append(cmd.Env, "DIR="+dir)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		testkit.Eventually(b, func() error {
			_, err := os.Stat(filepath.Join(dir, "started"))
			return err
		})
		rss := func() float64 {
			s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			if err != nil {
				b.Fatal(err)
			}
			var kb float64
			for _, l := range strings.Split(string(s), "\n") {
				if strings.HasPrefix(l, "VmRSS:") {
					fmt.Sscanf(strings.TrimPrefix(l, "VmRSS:"), "%f", &kb)
				}
			}
			return kb / 1024
		}
		var at20k float64
		for r := 0; r < 200_000/perTxn; r++ {
			put(r)
			if (r+1)*perTxn == 20_000 {
				at20k = rss()
			}
		}
		// Let nodewatch read what etcd has sent: its revision catches up.
		time.Sleep(2 * time.Second)
		at200k := rss()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		cmd.Wait()
		b.ReportMetric(at20k, "MiB-after-20k")
		b.ReportMetric(at200k, "MiB-after-200k")
	}
}
