//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// CuratorClient is a slow Curator client of `serve`, in process: a real
// gRPC Watch of nodes_in_cluster that takes Delay over each event and
// applies it to a map (a node sets it, a tombstone deletes it). It checks
// the stream's shape on the way: the backlog holds no tombstones and ends
// at exactly one PROGRESS_LAST_BACKLOGGED, every later event holds one node
// or one tombstone, and no tombstone names a node the stream never had.
// A broken stream is opened again, at the next address, and its backlog
// replaces the map. Methods are safe across goroutines; Close must be
// called.
type CuratorClient struct {
	addrs  []string
	delay  time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	gate

	mu        sync.Mutex // guards everything below
	nodes     map[string]*apipb.Node
	synced    bool // the current stream's backlog is complete
	events    int  // nodes and tombstones applied
	streams   int  // streams opened
	violation error
}

// StartCuratorClient starts watching addrs (tried in turn), taking delay
// over each event.
func StartCuratorClient(addrs []string, delay time.Duration) *CuratorClient {
	ctx, cancel := context.WithCancel(context.Background())
	c := &CuratorClient{addrs: addrs, delay: delay, cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

func (c *CuratorClient) run(ctx context.Context) {
	defer close(c.done)
	backoff := 50 * time.Millisecond
	for i := 0; ctx.Err() == nil; i++ {
		if c.watch(ctx, c.addrs[i%len(c.addrs)]) {
			backoff = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// watch follows one stream until it breaks; it reports whether the stream
// delivered anything.
func (c *CuratorClient) watch(ctx context.Context, addr string) bool {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, &apipb.WatchRequest{
		Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}},
	})
	if err != nil {
		return false
	}
	c.mu.Lock()
	c.streams++
	c.synced = false
	c.mu.Unlock()
	backlog := map[string]*apipb.Node{}
	got := false
	for {
		ev, err := w.Recv()
		if err != nil {
			return got
		}
		got = true
		if !c.wait(ctx) {
			return got
		}
		c.mu.Lock()
		c.apply(ev, &backlog)
		c.mu.Unlock()
	}
}

// wait takes the client's delay, and waits while it is paused.
func (c *CuratorClient) wait(ctx context.Context) bool {
	if !c.pass(ctx.Done()) {
		return false
	}
	t := time.NewTimer(c.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// apply applies ev; backlog collects the current stream's backlog until
// its marker. c.mu must be held.
func (c *CuratorClient) apply(ev *apipb.WatchEvent, backlog *map[string]*apipb.Node) {
	fail := func(format string, args ...any) {
		if c.violation == nil {
			c.violation = fmt.Errorf("curator client: "+format, args...)
		}
	}
	c.events += len(ev.Nodes) + len(ev.NodeTombstones)
	if !c.synced {
		if len(ev.NodeTombstones) > 0 {
			fail("a tombstone in the backlog: %v", ev)
		}
		for _, n := range ev.Nodes {
			(*backlog)[n.GetId()] = n
		}
		if ev.Progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			c.nodes, c.synced = *backlog, true
			*backlog = nil
		}
		return
	}
	if ev.Progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
		fail("a second PROGRESS_LAST_BACKLOGGED: %v", ev)
	}
	if len(ev.Nodes)+len(ev.NodeTombstones) != 1 {
		fail("an event after the backlog with %d nodes and %d tombstones, want one change", len(ev.Nodes), len(ev.NodeTombstones))
	}
	for _, n := range ev.Nodes {
		c.nodes[n.GetId()] = n
	}
	for _, tb := range ev.NodeTombstones {
		if _, ok := c.nodes[tb.GetNodeId()]; !ok {
			fail("a tombstone for %s, which the stream never had", tb.GetNodeId())
		}
		delete(c.nodes, tb.GetNodeId())
	}
}

// Equal compares the client's nodes with want (node objects by id, as
// Nodes returns them); "" when equal.
func (c *CuratorClient) Equal(want map[string]json.RawMessage) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return "the backlog of the current stream is not complete"
	}
	var diffs []string
	for _, id := range slices.Sorted(maps.Keys(want)) {
		n, ok := c.nodes[id]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %s", id, want[id]))
			continue
		}
		got, err := curator.Object(n)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", id, err))
		} else if !bytes.Equal(got.JSON(), want[id]) {
			diffs = append(diffs, fmt.Sprintf("%s: %s, want %s", id, got.JSON(), want[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: present, not in the source", id))
		}
	}
	return strings.Join(diffs, "\n")
}

// State returns what the client knows of its streams (Synced: the
// current one's backlog is complete).
func (c *CuratorClient) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return State{Synced: c.synced, Events: c.events, Violation: c.violation}
}

// Close stops the client and waits for it.
func (c *CuratorClient) Close() {
	c.cancel()
	<-c.done
}
