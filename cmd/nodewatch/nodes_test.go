//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// node returns a node record with the given id suffix, state and address.
func node(id string, state commonpb.NodeState, addr string) *apipb.Node {
	n := &apipb.Node{Id: "metropolis-" + id, State: state, Roles: &commonpb.NodeRoles{}}
	if addr != "" {
		n.Status = &commonpb.NodeStatus{ExternalAddress: addr}
	}
	return n
}

// putNode writes n under /nodes/.
func putNode(t *testing.T, c *clientv3.Client, n *apipb.Node) {
	t.Helper()
	b, err := curator.EncodeRecord(n)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Put(t, c, curator.DefaultPrefix+n.Id, string(b))
}

// fleet starts an etcd for the test holding the records of nodes, and
// returns its client URL and a client for it.
func fleet(t *testing.T, nodes ...*apipb.Node) (string, *clientv3.Client) {
	t.Helper()
	ep, c := etcdtest.StartWith(t)
	for _, n := range nodes {
		putNode(t, c, n)
	}
	return ep, c
}

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idC = "cccccccccccccccccccccccccccccccc"
)

// serve runs `nodewatch serve` in-process on a free loopback address over
// etcd at ep and returns the address and the run.
func serve(t *testing.T, ep string) (string, *proc) {
	t.Helper()
	addr, err := embedetcd.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr, serveAt(t, ep, addr)
}

// serveAt runs `nodewatch serve` on addr and waits until it serves.
func serveAt(t *testing.T, ep, addr string) *proc {
	t.Helper()
	p := start(t, "serve", "--etcd", ep, "--listen", addr)
	waitServing(t, p)
	return p
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lifecycle takes node id through its life, NEW, UP at addr, deleted,
// and returns the batches p printed for each step.
func lifecycle(t *testing.T, c *clientv3.Client, p *proc, id, addr string) []string {
	t.Helper()
	var got []string
	for _, change := range []func(){
		func() { putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_NEW, "")) },
		func() { putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_UP, addr)) },
		func() { etcdtest.Delete(t, c, curator.DefaultPrefix+"metropolis-"+id) },
	} {
		change()
		got = append(got, p.batch(t)...)
	}
	return got
}

// stop interrupts a run and waits for it.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	p.wait(t)
}

func TestNodesOnce(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	s := sim.New(sim.Config{Nodes: 4, Seed: 42})
	if err := s.Populate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, ep)
	stdout, stderr, code := runSync(t, "nodes", "--curator", addr, "--once")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"))
}

// TestNodesBigBacklog: a backlog over 2 MiB comes in several Curator
// events but is printed as one batch.
func TestNodesBigBacklog(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	const n = 40
	big := strings.Repeat("x", 100<<10) // 100 KiB per node: 4 MB in all
	ctx := context.Background()
	for i := 0; i < n; i++ {
		nd := node(strings.Repeat("0", 30)+itoa2(i), commonpb.NodeState_NODE_STATE_UP, "10.0.0.1")
		nd.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "blob", Value: big}}}
		b, _ := curator.EncodeRecord(nd)
		if _, err := c.Put(ctx, curator.DefaultPrefix+nd.Id, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := serve(t, ep)
	// Connected means the first event came, after serve listed 4 MB of
	// records: that should happen, so the dial timeout is the test's.
	stdout, stderr, code := runSync(t, "nodes", "--curator", addr, "--once", "--dial-timeout", timeout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != n+1 || !strings.Contains(lines[n], `"counts":{"new":40,"updated":0,"deleted":0}`) {
		t.Fatalf("got %d lines, last %.200q; want %d new then one batch_done", len(lines), lines[len(lines)-1], n)
	}
}

func itoa2(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func TestNodesLive(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	addr, _ := serve(t, ep)

	t.Run("lifecycle", func(t *testing.T) {
		p := start(t, "nodes", "--curator", addr)
		got := p.batch(t)
		got = append(got, lifecycle(t, c, p, idB, "10.0.0.2")...)
		putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_NEW, ""))
		got = append(got, p.batch(t)...)
		golden(t, got)
	})

	t.Run("--equals on the address", func(t *testing.T) {
		p := start(t, "nodes", "--curator", addr, "--equals", ".status.external_address")
		p.batch(t)
		n := node(idA, commonpb.NodeState_NODE_STATE_STANDBY, "10.0.0.1")
		putNode(t, c, n) // state changes, address does not: nothing
		p.none(t)
		n.Status.ExternalAddress = "10.9.9.9"
		putNode(t, c, n)
		got := p.batch(t)
		if len(got) != 2 || !strings.Contains(got[0], `"type":"updated"`) || !strings.Contains(got[0], `"external_address":"10.9.9.9"`) {
			t.Fatalf("got %q, want one updated with the new address", got)
		}
	})
}

func TestNodeOne(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	addr, _ := serve(t, ep)

	p := start(t, "node", "metropolis-"+idC, "--curator", addr)
	got := p.batch(t)                                                      // the empty initial batch: the node does not exist
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2")) // another node: nothing
	p.none(t)
	golden(t, append(got, lifecycle(t, c, p, idC, "10.0.0.3")...))

	// `node` with an id the server refuses: exit 1 with the reason.
	_, stderr, code := runSync(t, "node", "bad/id", "--curator", addr)
	if code != 1 || !strings.Contains(stderr, "InvalidArgument") {
		t.Fatalf("bad id: exit %d, stderr %q; want 1 and InvalidArgument", code, stderr)
	}
}

// TestNodesServeRestart: serve goes away while nodes runs, the fleet
// changes meanwhile (deletes included), serve comes back on the same
// address: nodes prints exactly the differences.
func TestNodesServeRestart(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t,
		node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"),
		node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"),
	)
	addr, srv := serve(t, ep)
	p := start(t, "nodes", "--curator", addr)
	got := p.batch(t)

	srv.stop(t)
	// The loss is said at once, while serve is away.
	waitStderr(t, p, "nodewatch: lost curator at "+addr+" (")
	etcdtest.Delete(t, c, curator.DefaultPrefix+"metropolis-"+idA)
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_DECOMMISSIONED, "10.0.0.2"))
	putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_NEW, ""))
	serveAt(t, ep, addr)

	got = append(got, p.batch(t)...)
	golden(t, got)
	// One line for the loss and one for the recovery (said before the
	// resync is printed), however many attempts failed in between.
	q := regexp.QuoteMeta(addr)
	matchStderr(t, p.stderr.String(),
		`nodewatch: lost curator at `+q+` \(.+\); retrying`,
		`nodewatch: recovered curator at `+q+` after [0-9.]+m?s blind( \([0-9]+ attempts? failed\))?`)
}

// matchStderr checks that stderr is one line matching each of want, in
// order.
func matchStderr(t *testing.T, stderr string, want ...string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile(`\A` + want[i] + `\z`).MatchString(got[i])
	}
	if !ok {
		t.Errorf("stderr:\n%s\nwant lines matching:\n%s", stderr, strings.Join(want, "\n"))
	}
}

// refusedSaysSoAtOnce runs nodewatch with args, which name an endpoint
// that refuses connections (dead) and --dial-timeout 3s: it says so in one
// line (want) within a second, keeps trying, and exits 3 at the deadline
// with the message (final) it always had.
func refusedSaysSoAtOnce(t *testing.T, want, final string, args ...string) {
	t.Helper()
	begin := time.Now()
	p := start(t, args...)
	waitStderr(t, p, want)
	if took := time.Since(begin); took > time.Second {
		t.Errorf("%q came %v after the start, want within a second", want, took)
	}
	if code := p.wait(t); code != exitUnavailable || time.Since(begin) < 3*time.Second {
		t.Errorf("exit %d after %v, want %d after --dial-timeout 3s", code, time.Since(begin), exitUnavailable)
	}
	matchStderr(t, p.stderr.String(), regexp.QuoteMeta(want), regexp.QuoteMeta(final)+`.*`)
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l := testkit.Listen(t)
	l.Close()
	return l.Addr().String()
}

// TestNodesRefusedSaysSoAtOnce: a Curator that refuses connections is one
// line within a second, then exit 3 at --dial-timeout (issue 52).
func TestNodesRefusedSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"nodes", "--once"}, {"node", "metropolis-" + idA}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			dead := deadAddr(t)
			refusedSaysSoAtOnce(t, "nodewatch: cannot reach curator at "+dead+" (connection refused); retrying for up to 3s",
				"nodewatch: unavailable: no connection to curator at "+dead+" within 3s (last error: ",
				append(args, "--curator", dead, "--dial-timeout", "3s")...)
		})
	}
}

// TestNodesFailover: two serve replicas over one etcd; the client, given
// both, moves to the second when the first stops, printing only
// differences.
func TestNodesFailover(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	addr1, srv1 := serve(t, ep)
	addr2, _ := serve(t, ep)
	p := start(t, "nodes", "--curator", addr1+","+addr2)
	p.batch(t)

	srv1.stop(t)
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_NEW, ""))
	// Whether B is made before or after the client reaches the second
	// replica decides whether it comes in the resync batch or after it;
	// either way: one resync, B printed once as new, A never again.
	var resynced, newB int
	for newB == 0 {
		for _, l := range p.batch(t) {
			switch {
			case strings.Contains(l, `"cause":"resync"`):
				resynced++
			case strings.Contains(l, `"type":"new","id":"metropolis-`+idB):
				newB++
			case strings.Contains(l, idA):
				t.Errorf("A printed again: %s", l)
			}
		}
	}
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
	last := p.batch(t)
	if resynced != 1 || newB != 1 || len(last) != 2 || !strings.Contains(last[0], `"type":"updated"`) {
		t.Fatalf("resync batches %d, new B %d, then %q", resynced, newB, last)
	}
	if !strings.Contains(p.stderr.String(), addr2) {
		t.Errorf("stderr does not mention the second endpoint %s:\n%s", addr2, p.stderr)
	}
}

// TestNodesFollowLeader: the endpoint given answers Unimplemented for
// Watch and names the leader in GetCurrentLeader, as a Metropolis
// non-leader does: the client follows it.
func TestNodesFollowLeader(t *testing.T) {
	t.Parallel()
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	leader, _ := serve(t, ep)
	host, port, _ := net.SplitHostPort(leader)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	(&curatortest.NonLeader{NodeID: "follower", LeaderNodeID: "leader", LeaderHost: host, LeaderPort: atoi(t, port)}).Register(gs)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)

	stdout, stderr, code := runSync(t, "nodes", "--curator", l.Addr().String(), "--once")
	if code != 0 || !strings.Contains(stdout, `"id":"metropolis-`+idA+`"`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, leader) {
		t.Errorf("stderr does not say where it went:\n%s", stderr)
	}
}

// TestServeBadRecord: an undecodable record is reported with its key and
// skipped; streams go on.
func TestServeBadRecord(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	etcdtest.Put(t, c, curator.DefaultPrefix+"metropolis-broken", "{not a node")
	addr, srv := serve(t, ep)
	p := start(t, "nodes", "--curator", addr)
	if got := p.batch(t); len(got) != 2 {
		t.Fatalf("initial batch %q, want node A only", got)
	}
	etcdtest.Put(t, c, curator.DefaultPrefix+"metropolis-"+idB, `{"id":"metropolis-someone-else"}`) // id mismatch
	putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_NEW, ""))
	if got := p.batch(t); !strings.Contains(got[0], idC) {
		t.Fatalf("after bad records: %q, want node C", got)
	}
	errs := srv.stderr.String()
	for _, key := range []string{`/nodes/metropolis-broken\"`, `/nodes/metropolis-` + idB + `\"`} {
		if !strings.Contains(errs, key) {
			t.Errorf("serve's stderr does not name %s:\n%s", key, errs)
		}
	}
}

// TestNodesSimNoLostUpdate: nodes follows a fleet the simulator changes as
// fast as etcd takes it. Every kind of event shows up, and once the
// simulator stops, the printed stream, replayed, equals the records in
// etcd: no update is lost, whatever was coalesced on the way.
func TestNodesSimNoLostUpdate(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	ctx := context.Background()
	s := sim.New(sim.Config{Nodes: 10, Seed: 7})
	if err := s.Populate(ctx, c); err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, ep)
	p := start(t, "nodes", "--curator", addr)
	view := &replay.Checker{}
	seen := map[string]int{}
	apply := func(lines []string) {
		for _, l := range lines {
			seen[replayLine(t, view, l)]++
		}
	}
	apply(p.batch(t))
	if err := s.RunSteps(ctx, c, 0, 0, 400); err != nil {
		t.Fatal(err)
	}

	// Replay what was printed so far, until it equals etcd.
	want := etcdNodes(t, c)
	testkit.Eventually(t, func() error {
		for len(p.lines) > 0 {
			apply([]string{<-p.lines})
		}
		if d := view.Equal(want); d != "" {
			return fmt.Errorf("replayed stream differs from etcd:\n%s", d)
		}
		return nil
	})
	for _, typ := range []string{"new", "updated", "deleted"} {
		if seen[typ] == 0 {
			t.Errorf("no %s event in %v", typ, seen)
		}
	}
}

// etcdNodes returns the node records under /nodes/ as nodewatch prints
// their objects, in plain JSON types, by id.
func etcdNodes(t *testing.T, c *clientv3.Client) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := c.Get(ctx, curator.DefaultPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), curator.DefaultPrefix)
		n, err := curator.DecodeRecord(id, kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := curator.Object(n)
		if err != nil {
			t.Fatal(err)
		}
		var plain any
		json.Unmarshal(obj.JSON(), &plain)
		want[id] = plain
	}
	return want
}

// replayLine applies one printed event line to view, which checks it
// against every rule of the stream, and returns the event's type.
func replayLine(t testing.TB, view *replay.Checker, line string) string {
	t.Helper()
	if err := view.Line([]byte(line)); err != nil {
		t.Error(err)
	}
	var ev struct{ Type string }
	json.Unmarshal([]byte(line), &ev)
	return ev.Type
}
