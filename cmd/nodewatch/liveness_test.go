//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// The liveness tests give a silent connection up after 2s of silence
// (the defaults: 8s), and wait for the change made after the silence for
// up to recoverBound: the time to recover is a figure for RELIABILITY.md
// (make faults), not an assertion. Before nodewatch proved its
// connections alive, each of them waited for ever.
var fastKeepalive = []string{"--keepalive-time", "1s", "--keepalive-timeout", "1s"}

const recoverBound = 60 * time.Second

// waitLine waits up to recoverBound for a stdout line holding every one
// of subs, and returns how long it took.
func (p *proc) waitLine(t *testing.T, subs ...string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(recoverBound)
	for {
		select {
		case line := <-p.lines:
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(line, s)
			}
			if ok {
				return time.Since(start)
			}
		case <-p.done:
			t.Fatalf("nodewatch ended (exit %d) before a line with %q; stderr:\n%s", p.code, subs, p.stderr)
		case <-deadline:
			t.Fatalf("no line with %q within %v; stderr:\n%s", subs, recoverBound, p.stderr)
		}
	}
}

// TestSilentConnection: whichever connection goes silent, the watcher
// at its end prints the next change, and the side that noticed says on
// stderr that it lost the connection and when it was current again.
func TestSilentConnection(t *testing.T) {
	t.Parallel()
	// silenced starts a watcher of args over the Curator at addr through
	// a forwarder to silence; the watcher logs.
	silenced := func(t *testing.T, addr string, args ...string) (watcher, logger *proc, fwd *netfault.Forwarder) {
		fwd = netfault.Start(t, addr)
		p := start(t, append(append(args, "--curator", fwd.Addr()), fastKeepalive...)...)
		return p, p, fwd
	}
	for _, tc := range []struct {
		name string
		// start starts the watcher over the etcd at ep, one of its
		// connections through fwd, and returns it and the process that
		// logs the loss.
		start func(t *testing.T, ep string) (watcher, logger *proc, fwd *netfault.Forwarder)
		logs  []string // what logger logs, a line each
	}{
		{"key", func(t *testing.T, ep string) (*proc, *proc, *netfault.Forwarder) {
			fwd := netfault.Start(t, ep)
			p := start(t, append([]string{"key", "--prefix", curator.DefaultPrefix, "--etcd", "http://" + fwd.Addr()}, fastKeepalive...)...)
			return p, p, fwd
		}, []string{"lost etcd at", "the connection went silent", "recovered etcd at"}},
		{"nodes", func(t *testing.T, ep string) (*proc, *proc, *netfault.Forwarder) {
			addr, _ := serve(t, ep)
			return silenced(t, addr, "nodes")
		}, []string{"lost curator at", "the connection went silent", "recovered curator at"}},
		{"node ID", func(t *testing.T, ep string) (*proc, *proc, *netfault.Forwarder) {
			addr, _ := serve(t, ep)
			return silenced(t, addr, "node", "metropolis-"+idA)
		}, []string{"lost curator at", "the connection went silent", "recovered curator at"}},
		// serve ends its clients' streams with UNAVAILABLE once it cannot
		// confirm its view, reconnects to etcd, and serves the view
		// again, which they take as a resync.
		{"serve's etcd", func(t *testing.T, ep string) (*proc, *proc, *netfault.Forwarder) {
			fwd := netfault.Start(t, ep)
			srv, addr := startServe(t, nil, append([]string{"--etcd", "http://" + fwd.Addr()}, fastKeepalive...)...)
			return start(t, "nodes", "--curator", addr), srv, fwd
		}, []string{"ending Watch streams with UNAVAILABLE", "serving Watch and GetNodes again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_NEW, "10.0.0.1"))
			p, logger, fwd := tc.start(t, ep)
			p.batch(t)
			fwd.Silence()
			putNode(t, c, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
			d := p.waitLine(t, `"type":"updated"`, `NODE_STATE_UP`)
			t.Logf("the change came %v after the connection went silent", d.Round(time.Millisecond))
			for _, l := range tc.logs {
				waitStderr(t, logger, l)
			}
		})
	}
}

// TestNodesMovesToHealthyReplica: with two --curator endpoints, a client
// of a replica that lost etcd moves to the other one and gets the change
// made meanwhile, although the first replica's etcd stays unreachable.
func TestNodesMovesToHealthyReplica(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_NEW, "10.0.0.1"))
	fwd := netfault.Start(t, ep)
	_, cutOff := startServe(t, nil, append([]string{"--etcd", "http://" + fwd.Addr()}, fastKeepalive...)...)
	_, healthy := startServe(t, nil, "--etcd", ep)
	p := start(t, "nodes", "--curator", cutOff+","+healthy)
	p.batch(t)
	fwd.Block()
	putNode(t, c, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	p.waitLine(t, `"type":"updated"`, `NODE_STATE_UP`)
	waitStderr(t, p, "lost curator at "+cutOff+" (")
	waitStderr(t, p, "recovered curator at "+healthy+" after ")
}

// heartbeatLine is a heartbeat as printed.
type heartbeatLine struct {
	Type      string `json:"type"`
	Confirmed string `json:"confirmed"`
	Rev       int64  `json:"rev"`
}

// nextHeartbeat returns the next heartbeat line; other lines fail the test.
func (p *proc) nextHeartbeat(t *testing.T) heartbeatLine {
	t.Helper()
	var hb heartbeatLine
	line := p.next(t)
	if err := json.Unmarshal([]byte(line), &hb); err != nil || hb.Type != "heartbeat" {
		t.Fatalf("want a heartbeat, got %s (%v)", line, err)
	}
	return hb
}

// TestKeyHeartbeat: `key --heartbeat` prints heartbeats while nothing
// changes, each at a revision etcd confirmed: also while nothing at all is
// written; writes elsewhere in etcd move it on (a timer alone would
// repeat the last printed revision), and it never goes backwards.
func TestKeyHeartbeat(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/h/a", `"1"`)
	listed := etcdtest.Put(t, c, "/elsewhere/0", "x")
	p := start(t, "key", "--prefix", "/h/", "--etcd", ep, "--heartbeat", "300ms")
	p.batch(t)
	// Nothing is written yet: the watch starts after etcd's revision,
	// where etcd answers no progress request, and is confirmed anyway.
	for range 2 {
		if hb := p.nextHeartbeat(t); hb.Confirmed != "watch" || hb.Rev != listed {
			t.Fatalf("heartbeat %+v while etcd is quiet: want confirmed \"watch\" at rev %d", hb, listed)
		}
	}
	var last int64
	for i := range 6 {
		rev := etcdtest.Put(t, c, fmt.Sprintf("/elsewhere/%d", i+1), "x") // not watched
		for {
			hb := p.nextHeartbeat(t)
			if hb.Confirmed != "watch" {
				t.Fatalf("heartbeat %+v: want confirmed \"watch\"", hb)
			}
			if hb.Rev < last {
				t.Fatalf("heartbeat rev %d after %d: went backwards", hb.Rev, last)
			}
			last = hb.Rev
			if hb.Rev > rev {
				t.Fatalf("heartbeat rev %d: etcd is only at %d", hb.Rev, rev)
			}
			if hb.Rev == rev {
				break // confirmed by etcd after the write
			}
		}
	}
}

// TestNodesHeartbeat: `nodes --heartbeat` prints heartbeats that say the
// connection was confirmed (the Curator wire has no revisions).
func TestNodesHeartbeat(t *testing.T) {
	t.Parallel()
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_NEW, "10.0.0.1"))
	addr, _ := serve(t, ep)
	p := start(t, "nodes", "--curator", addr, "--heartbeat", "300ms")
	p.batch(t)
	for range 3 {
		if hb := p.nextHeartbeat(t); hb.Confirmed != "connection" || hb.Rev != 0 {
			t.Fatalf("heartbeat %+v: want confirmed \"connection\", no rev", hb)
		}
	}
}
