//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// TestSoak (make soak; skipped unless NODEWATCH_SOAK is a duration): the
// simulator changes a 200-node fleet as fast as etcd takes it, a `serve`
// process fans the changes out, and a `nodewatch nodes` process prints
// them to a reader that takes 1ms per line, far slower than the changes
// come. It reports the resident memory of both processes over time (it
// must stay flat: memory is bounded by ids, not updates) and, once the
// simulator stops and the reader catches up, checks that the printed
// stream, replayed, equals etcd.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("NODEWATCH_SOAK"))
	if err != nil {
		t.Skip("set NODEWATCH_SOAK=2m (or run make soak) to soak")
	}
	ep, c := etcdtest.StartWith(t)
	ctx := context.Background()
	s := sim.New(sim.Config{Nodes: 200, Seed: 99})
	if err := s.Populate(ctx, c); err != nil {
		t.Fatal(err)
	}
	addr, err := unusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(binary(t), "serve", "--etcd", ep, "--listen", addr)
	srvErr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if l, err := bufio.NewReader(srvErr).ReadString('\n'); err != nil || !strings.Contains(l, "serving") {
		t.Fatalf("serve: %q, %v", l, err)
	}
	go io.Copy(io.Discard, srvErr)
	nodes := exec.Command(binary(t), "nodes", "--curator", addr)
	if os.Getenv("NODEWATCH_SOAK_GCTRACE") != "" {
		nodes.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	}
	r, _ := nodes.StdoutPipe()
	var stderr testkit.Buffer
	nodes.Stderr = &stderr
	if err := nodes.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { nodes.Process.Kill(); nodes.Wait() }()

	var mu sync.Mutex // guards view, lines, slow
	view := &replay.Checker{}
	lines, slow := 0, true
	go func() {
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			replayLine(t, view, l)
			lines++
			throttle := slow
			mu.Unlock()
			if throttle {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	simCtx, stopSim := context.WithTimeout(ctx, d)
	defer stopSim()
	simDone := make(chan error, 1)
	go func() { simDone <- s.Run(simCtx, c, 0, 0) }()
	tick := time.NewTicker(d / 10)
	defer tick.Stop()
	var first, last, peakNodes, peakServe int
	for sampling := true; sampling; {
		select {
		case <-tick.C:
			rn, rs := rssKiB(nodes.Process.Pid), rssKiB(srv.Process.Pid)
			if first == 0 {
				first = rn
			}
			peakNodes, peakServe, last = max(peakNodes, rn), max(peakServe, rs), rn
			mu.Lock()
			t.Logf("%v: %d changes written, %d lines read; RSS nodes %d MiB, serve %d MiB",
				time.Since(simStart(simCtx, d)).Round(time.Second), s.Stats().Steps, lines, rn>>10, rs>>10)
			mu.Unlock()
		case <-simDone:
			sampling = false
		}
	}
	mu.Lock()
	slow = false
	mu.Unlock()
	t.Logf("simulator done: %d changes; peak RSS nodes %d MiB (first sample %d MiB), serve %d MiB", s.Stats().Steps, peakNodes>>10, first>>10, peakServe>>10)
	if last > 2*first {
		t.Errorf("nodes grew from %d MiB to %d MiB under a slow reader: memory is not bounded by ids", first>>10, last>>10)
	}

	want := etcdNodes(t, c)
	err = testkit.Poll(ctx, time.Minute, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if d := view.Equal(want); d != "" {
			return false, fmt.Errorf("replayed stream differs from etcd:\n%s", d)
		}
		t.Logf("replayed stream equals etcd after %d lines", lines)
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr.String())
	}
	if f := os.Getenv("NODEWATCH_SOAK_GCTRACE"); f != "" {
		os.WriteFile(f, []byte(stderr.String()), 0o644)
	}
}

// rssKiB returns the resident set size of process pid in KiB (0 if it
// cannot be read).
func rssKiB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// simStart returns when a context with timeout d was made.
func simStart(ctx context.Context, d time.Duration) time.Time {
	dl, _ := ctx.Deadline()
	return dl.Add(-d)
}
