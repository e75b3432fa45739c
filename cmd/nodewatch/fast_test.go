//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestFastOffIdentical: with every fast path off (NODEWATCH_FAST=off, see
// package fast), the binary prints the same bytes as with them on, for
// key (a random history of transactions over JSON values of many shapes,
// text and large values, followed live by a run of each mode side by
// side) and for nodes (a seeded simulated fleet through a serve of the
// same mode, listed with --once). Each transaction is written once both
// runs have printed the last one, so that neither merges batches (a
// reader that falls behind gets batches merged, at moments of its own),
// and each changes a marker key that every variant prints.
func TestFastOffIdentical(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(51, 7))
	etcdtest.Put(t, c, "/fast/k0", `{"state":"UP","n":0}`)
	value := func() string { return testkit.RandomValue(rng, 1500+rng.IntN(600), 20) }
	for _, extra := range [][]string{
		{},
		{"--filter", `.value.state == "UP"`},
		{"--equals", `.value.state`},
		{"--filter", `has("value") and (.value | type) == "object"`, "--value", "json"},
	} {
		args := append([]string{"key", "/fast/", "--prefix", "--etcd", ep}, extra...)
		var runs [2]<-chan string
		var stderrs [2]*testkit.Buffer
		var cmds [2]*exec.Cmd
		for i, env := range [][]string{nil, {"NODEWATCH_FAST=off"}} {
			cmds[i] = command(t, args...)
			cmds[i].Env = append(cmds[i].Env, env...)
			runs[i], stderrs[i] = startLines(t, cmds[i])
		}
		var out [2][]string
		// upTo reads what run i prints up to the end of the batch at rev
		// (any batch, for rev 0).
		upTo := func(i int, rev int64) {
			t.Helper()
			for {
				select {
				case l, ok := <-runs[i]:
					if !ok {
						t.Fatalf("nodewatch %s (run %d) ended; stderr %q", strings.Join(args, " "), i, stderrs[i].String())
					}
					out[i] = append(out[i], l)
					if strings.Contains(l, `"batch_done"`) && (rev == 0 || strings.HasSuffix(l, fmt.Sprintf(`"rev":%d}`, rev))) {
						return
					}
				case <-time.After(timeout):
					t.Fatalf("nodewatch %s (run %d): no batch at rev %d; stderr %q", strings.Join(args, " "), i, rev, stderrs[i].String())
				}
			}
		}
		upTo(0, 0)
		upTo(1, 0)
		for n := range 150 {
			ops := append([]clientv3.Op{clientv3.OpPut("/fast/zz-sync", fmt.Sprintf(`{"state":%q,"seq":%d}`, []string{"UP", "DOWN"}[n%2], n))},
				etcdtest.RandomOps(rng, "/fast/", 12, 7, value)...)
			resp, err := c.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				t.Fatal(err)
			}
			upTo(0, resp.Header.Revision)
			upTo(1, resp.Header.Revision)
		}
		// The next variant's history is not theirs: end them, and read
		// what they printed to its end.
		for i := range cmds {
			cmds[i].Process.Kill()
			for range runs[i] {
			}
		}
		on, off := strings.Join(out[0], "\n"), strings.Join(out[1], "\n")
		if on != off {
			t.Fatalf("nodewatch %s: output differs with NODEWATCH_FAST=off\non:\n%s\noff:\n%s", strings.Join(args, " "), on, off)
		}
	}

	// Nodes: the same fleet through a serve of each mode.
	if code, _, stderr := runCmd(t, command(t, "sim", "--etcd", ep, "--nodes", "40", "--steps", "400", "--rate", "0", "--seed", "51")); code != 0 {
		t.Fatalf("sim: exit %d: %s", code, stderr)
	}
	var out [2]string
	for i, env := range [][]string{nil, {"NODEWATCH_FAST=off"}} {
		addr, _ := unusedAddr()
		srv := command(t, "serve", "--etcd", ep, "--listen", addr)
		srv.Env = append(srv.Env, env...)
		stderr, _ := srv.StderrPipe()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
		if l, err := bufio.NewReader(stderr).ReadString('\n'); err != nil || !strings.Contains(l, "serving Curator Watch on "+addr) {
			t.Fatalf("serve: %q, %v", l, err)
		}
		cmd := command(t, "nodes", "--curator", addr, "--once")
		cmd.Env = append(cmd.Env, env...)
		code, stdout, errOut := runCmd(t, cmd)
		if code != 0 {
			t.Fatalf("nodes --once (%v): exit %d: %s", env, code, errOut)
		}
		out[i] = stdout
	}
	if out[0] != out[1] {
		t.Fatalf("nodes --once: output differs with NODEWATCH_FAST=off\non:\n%s\noff:\n%s", out[0], out[1])
	}
	if strings.Count(out[0], `"type":"new"`) < 20 {
		t.Fatalf("nodes --once printed %d nodes: the fleet does not test what it should", strings.Count(out[0], `"type":"new"`))
	}
}
