package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// fatNode returns a node whose record is about 2 KiB, so that a few dozen
// events fill a client's HTTP/2 window.
func fatNode(id string, gen int) *apipb.Node {
	n := curatortest.Node(id, commonpb.NodeState_NODE_STATE_UP, fmt.Sprintf("10.%d.%d.%d", gen/65536%256, gen/256%256, gen%256))
	n.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "pad", Value: strings.Repeat("x", 2000)}}}
	return n
}

// clientView is a Curator client's view: the events of a stream applied in order.
type clientView map[string]*apipb.Node

func (v clientView) apply(ev *apipb.WatchEvent) {
	for _, n := range ev.GetNodes() {
		v[n.GetId()] = n
	}
	for _, t := range ev.GetNodeTombstones() {
		delete(v, t.GetNodeId())
	}
}

// diff describes how v differs from want ("" when equal).
func (v clientView) diff(want clientView) string {
	var missing, extra, stale []string
	for id, n := range want {
		switch got, ok := v[id]; {
		case !ok:
			missing = append(missing, id)
		case !proto.Equal(got, n):
			stale = append(stale, id)
		}
	}
	for id := range v {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(extra)+len(stale) == 0 {
		return ""
	}
	return fmt.Sprintf("%d missing %v, %d that should be gone %v, %d stale %v", len(missing), head(missing), len(extra), head(extra), len(stale), head(stale))
}

func head(ids []string) []string { return ids[:min(len(ids), 5)] }

// TestServerStalledClient: a Curator client reads the backlog, then stops
// reading (its HTTP/2 windows are as small as gRPC allows, so serve's
// sends block) while 50 of the nodes it received only in the backlog are
// deleted among about 2,000 updates of other nodes, and nodes are created
// and deleted. Once it reads again, it must end with exactly the nodes in
// etcd, each in its latest state.
func TestServerStalledClient(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	rng := rand.New(rand.NewPCG(1, 2))
	want := clientView{}
	var ids []string
	for i := range 200 {
		id := fmt.Sprintf("node-%03d", i)
		ids = append(ids, id)
		want[id] = fatNode(id, 0)
	}
	txn(t, st, want, nil)
	s := startServer(t, Config{Etcd: st.Etcd})
	g := curatortest.ServeGRPC(t, "", s)

	conn, err := grpc.NewClient(g.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stalled := curatortest.Watch(t, conn, curatortest.NodesReq())
	got := clientView{}
	for {
		ev := stalled.Next()
		got.apply(ev)
		if ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			break
		}
	}
	if d := got.diff(want); d != "" {
		t.Fatalf("backlog: %s", d)
	}
	// A reader that keeps up tells when serve has applied every change.
	eager := follow(t, curatortest.Dial(t, g.Addr))

	// The stalled client no longer reads. 50 backlog nodes are deleted,
	// the others updated about 2,000 times, 100 nodes come and 40 of
	// them go again, 10 writes to a transaction.
	doomed, others := ids[:50], ids[50:]
	var writes []func() (id string, n *apipb.Node)
	for gen := 1; gen <= 2000; gen++ {
		id := others[rng.IntN(len(others))]
		writes = append(writes, func() (string, *apipb.Node) { return id, fatNode(id, gen) })
	}
	for _, id := range doomed {
		writes = append(writes, func() (string, *apipb.Node) { return id, nil })
	}
	for i := range 100 {
		id := fmt.Sprintf("new-%03d", i)
		writes = append(writes, func() (string, *apipb.Node) { return id, fatNode(id, i) })
		if i%5 < 2 {
			writes = append(writes, func() (string, *apipb.Node) { return id, nil })
		}
	}
	rng.Shuffle(len(writes), func(i, j int) { writes[i], writes[j] = writes[j], writes[i] })
	// A node's deletion must come after its creation: order each id's
	// writes by when they were made, keeping the shuffled slots.
	writes = orderPerID(writes)
	for len(writes) > 0 {
		n := min(10, len(writes))
		batch := map[string]*apipb.Node{}
		var order []string
		for _, w := range writes[:n] {
			id, nd := w()
			if _, dup := batch[id]; !dup {
				order = append(order, id)
			}
			batch[id] = nd
		}
		writes = writes[n:]
		changes := clientView{}
		var deletes []string
		for _, id := range order {
			if batch[id] == nil {
				delete(want, id)
				deletes = append(deletes, id)
			} else {
				want[id] = batch[id]
				changes[id] = batch[id]
			}
		}
		txn(t, st, changes, deletes)
	}

	eagerEvents := eager.waitFor(want)

	// Read on: the stalled client must catch up with etcd exactly. It
	// fails once no event has come for testkit.Timeout: a loaded
	// machine may be slow, a lost change never comes.
	stalledEvents := 0
	quiet := time.NewTimer(testkit.Timeout)
	defer quiet.Stop()
	for got.diff(want) != "" {
		select {
		case ev, ok := <-stalled.Events:
			if !ok {
				t.Fatalf("stream ended: %v", stalled.Err)
			}
			got.apply(ev)
			stalledEvents++
			quiet.Reset(testkit.Timeout)
		case <-quiet.C:
			t.Fatalf("no event for %v after %d events, and the stalled client's view differs from etcd: %s", testkit.Timeout, stalledEvents, got.diff(want))
		}
	}
	if stalledEvents >= eagerEvents {
		t.Fatalf("the stalled client got %d events, the eager one %d: it never fell behind, so the test proves nothing", stalledEvents, eagerEvents)
	}
	t.Logf("stalled client: %d events, eager client: %d", stalledEvents, eagerEvents)
	stalled.None()
}

// orderPerID reorders writes so that each id's writes keep the order they
// were made in, while the slots ids take stay shuffled.
func orderPerID(writes []func() (string, *apipb.Node)) []func() (string, *apipb.Node) {
	type w = func() (string, *apipb.Node)
	byID := map[string][]w{}
	for _, f := range writes {
		id, _ := f()
		byID[id] = append(byID[id], f)
	}
	out := make([]w, 0, len(writes))
	for _, f := range writes {
		id, _ := f()
		out = append(out, byID[id][0])
		byID[id] = byID[id][1:]
	}
	return out
}

// txn writes nodes and deletes ids in etcd transactions of at most 100
// operations.
func txn(t *testing.T, st *curatortest.Store, nodes clientView, deletes []string) {
	t.Helper()
	var ops []clientv3.Op
	for id, n := range nodes {
		b, err := curator.EncodeRecord(n)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(st.Prefix+id, string(b)))
	}
	for _, id := range deletes {
		ops = append(ops, clientv3.OpDelete(st.Prefix+id))
	}
	for len(ops) > 0 {
		n := min(len(ops), 100) // etcd's default max-txn-ops is 128
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		_, err := st.Etcd.Txn(ctx).Then(ops[:n]...).Commit()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ops = ops[n:]
	}
}

// eagerView is a nodes_in_cluster stream read as fast as it comes.
type eagerView struct {
	t       *testing.T
	mu      sync.Mutex // guards v and events
	v       clientView
	events  int           // events after the backlog
	changed chan struct{} // capacity 1: "v changed"
}

// follow reads a nodes_in_cluster stream on conn into a view until the
// test ends.
func follow(t *testing.T, conn *grpc.ClientConn) *eagerView {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, curatortest.NodesReq())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &eagerView{t: t, v: clientView{}, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		backlog := true
		for {
			ev, err := w.Recv()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.v.apply(ev)
			if !backlog {
				e.events++
			}
			backlog = backlog && ev.GetProgress() != apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED
			e.mu.Unlock()
			select {
			case e.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

// waitFor waits until the view equals want and returns how many events
// after the backlog it took. It fails once the view has not changed for
// testkit.Timeout.
func (e *eagerView) waitFor(want clientView) int {
	e.t.Helper()
	quiet := time.NewTimer(testkit.Timeout)
	defer quiet.Stop()
	for {
		e.mu.Lock()
		d, n := e.v.diff(want), e.events
		e.mu.Unlock()
		if d == "" {
			return n
		}
		select {
		case <-e.changed:
			quiet.Reset(testkit.Timeout)
		case <-quiet.C:
			e.t.Fatalf("the eager reader's view did not change for %v and differs: %s", testkit.Timeout, d)
		}
	}
}
