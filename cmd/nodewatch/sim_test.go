//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// The command writes what the library writes for the same seed, cleans up
// with --clear, and stops at --steps or --duration.
func TestSimCommand(t *testing.T) {
	ep, c := etcdtest.StartWith(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	s := sim.New(sim.Config{Nodes: 7, Seed: 3, Prefix: "/want/", Format: sim.Binary})
	if err := s.Populate(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.RunSteps(ctx, c, 0, 0, 60); err != nil {
		t.Fatal(err)
	}
	etcdtest.Put(t, c, "/got/stale", "left from an earlier run")

	stdout, stderr, code := runSync(t, "sim", "--etcd", ep, "--nodes", "7", "--seed", "3", "--prefix", "/got/",
		"--format", "binary", "--rate", "0", "--steps", "60", "--clear")
	if code != exitOK || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		`nodewatch: sim: deleted 1 keys under "/got/"`,
		`nodewatch: sim: wrote 7 nodes under "/got/" (seed 3, binary records)`,
		"nodewatch: sim: " + s.Stats().String(),
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if diff := cmp.Diff(etcdtest.Get(t, c, "/want/"), etcdtest.Get(t, c, "/got/")); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}

	// A paced run ends after --duration with exit 0.
	stdout, stderr, code = runSync(t, "sim", "--etcd", ep, "--nodes", "3", "--prefix", "/paced/", "--rate", "100", "--duration", "50ms")
	if code != exitOK || stdout != "" {
		t.Fatalf("--duration: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}

	// Without limits it runs until interrupted, then logs its summary and
	// exits 130. It is interrupted once its first record is in etcd.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	records := c.Watch(wctx, "/endless/", clientv3.WithPrefix())
	rctx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	var errOut testkit.Buffer
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(rctx, []string{"sim", "--etcd", ep, "--prefix", "/endless/"}, strings.NewReader(""), &out, &errOut)
	}()
	select {
	case <-records:
	case <-time.After(timeout):
		t.Fatalf("no record within %v; stderr:\n%s", timeout, errOut.String())
	}
	interrupt()
	select {
	case code := <-done:
		if code != exitInterrupted || out.Len() != 0 || !strings.Contains(errOut.String(), "changes") {
			t.Errorf("interrupted: exit %d, stdout %q, stderr:\n%s", code, out.String(), errOut.String())
		}
	case <-time.After(timeout):
		t.Fatalf("did not end within %v of the interrupt", timeout)
	}
}
