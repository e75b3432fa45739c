package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// Kind is a kind of fault.
type Kind int

// The faults a run injects, in the order Kinds returns them.
const (
	// LeaderKill: SIGKILL the etcd leader, let the workload write
	// through the election, restart it on its data dir and ports.
	LeaderKill Kind = iota
	// WatchedMemberKill: SIGKILL the member a `key --prefix` watcher is
	// connected to (the only one it was given), then restart it.
	WatchedMemberKill
	// MemberPause: SIGSTOP a member (sockets open, no answers), SIGCONT.
	MemberPause
	// CompactionCut: SIGSTOP a `key` process, cut its connections, write,
	// compact etcd at the current revision, SIGCONT: it must resync.
	CompactionCut
	// ServeRestart: stop a `serve` replica (SIGTERM or SIGKILL) and start
	// it again on the same address.
	ServeRestart
	// ServeFailover: SIGKILL the `serve` replica `nodes` is connected to;
	// `nodes` must move to the other; then start it again.
	ServeFailover
	// ReaderPause: stop reading a stream's stdout (or the slow Curator
	// client's events) until the pipe is full, then read on.
	ReaderPause
	// SilentEtcdWatcher: the connection between the pinned `key --prefix`
	// and its member goes silent (bytes dropped both ways, nothing
	// closed); new connections pass.
	SilentEtcdWatcher
	// SilentServeEtcd: the connections between the `serve` replica `nodes`
	// is connected to and etcd go silent.
	SilentServeEtcd
	// SilentNodesServe: the connection between `nodes` and its `serve`
	// replica goes silent.
	SilentNodesServe
	// QuorumLoss: two of the three members are stopped (SIGSTOP or
	// SIGKILL) until the third says it has no leader and writes fail,
	// then both are brought back.
	QuorumLoss
	// MemberPartition: the member the pinned `key --prefix` watches is
	// cut off from its peers (its clients still reach it) until it has
	// no leader and the other two took writes, then it is reconnected.
	MemberPartition
)

// kindNames are the kinds' names, as reports print them.
var kindNames = [...]string{
	LeaderKill:        "etcd-leader-kill",
	WatchedMemberKill: "etcd-watched-member-kill",
	MemberPause:       "etcd-member-pause",
	CompactionCut:     "compaction-cut",
	ServeRestart:      "serve-restart",
	ServeFailover:     "serve-failover",
	ReaderPause:       "reader-pause",
	SilentEtcdWatcher: "silent-etcd-watcher",
	SilentServeEtcd:   "silent-serve-etcd",
	SilentNodesServe:  "silent-nodes-serve",
	QuorumLoss:        "quorum-loss",
	MemberPartition:   "member-partition",
}

// String returns k's name, e.g. "etcd-leader-kill".
func (k Kind) String() string { return kindNames[k] }

// Kinds returns every kind of fault.
func Kinds() []Kind {
	ks := make([]Kind, len(kindNames))
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// Config describes one run.
type Config struct {
	// Seed chooses the faults, their targets and the workload.
	Seed uint64
	// Bin is the nodewatch binary; Exe the executable that becomes an etcd
	// member when MemberEnv is set (the test binary).
	Bin, Exe string
	// Env is the environment of nodewatch processes.
	Env []string
	// Faults is how many faults to inject; kinds come in a shuffled
	// order, every kind once before any twice.
	Faults int
	// Rate is the workload's writes per second.
	Rate float64
	// Converge is how long streams get, once the faults stopped, to equal
	// the source, and how long a stream gets to recover from a fault.
	Converge time.Duration
	// Etcdctl is the etcdctl binary run beside nodewatch under the same
	// faults, for its time to recover; "" runs none.
	Etcdctl string
}

// Report is what a run found.
type Report struct {
	Seed   uint64
	Faults map[Kind]int
	// Events is the number of events checked (every stream's new, updated
	// and deleted lines, and the Curator client's nodes and tombstones).
	Events int
	// Writes is the number of writes the workload made.
	Writes int64
	// Violations are rules of a stream broken (a Checker refused a line).
	Violations []string
	// Divergences are streams whose state did not become the source's.
	Divergences []string
	// Problems are faults that did not have their effect (no resync after
	// a compaction, `nodes` did not move) and processes that ended.
	Problems []string
	// Recoveries are the measured times to recover, by fault.
	Recoveries []Recovery
	Duration   time.Duration
}

// Failed reports whether the run found anything wrong.
func (r *Report) Failed() bool {
	return len(r.Violations)+len(r.Divergences)+len(r.Problems) > 0
}

// run is one run's state.
type run struct {
	t       testing.TB
	cfg     Config
	rng     *rand.Rand
	report  *Report
	cluster *Cluster
	client  *clientv3.Client
	work    *Workload
	proxies []*etcdtest.Proxy
	servers []*Server
	streams map[string]*Stream
	keyAll  *Stream // key --prefix, one member: pinned
	pinned  int
	keyCut  *Stream // key --prefix, through the proxies
	nodes   *Stream
	curator *CuratorClient
	nodeID  string

	keyFwd   *netfault.Forwarder     // keyAll to its member
	serveFwd [][]*netfault.Forwarder // serve replica i to member m
	nodesFwd []*netfault.Forwarder   // nodes to serve replica i
	ctlFwd   *netfault.Forwarder     // ctlPin to the pinned member
	ctlPin   *Etcdctl                // etcdctl on the pinned member, through ctlFwd; nil without etcdctl
	ctlAll   *Etcdctl                // etcdctl on every member; nil without etcdctl
	markers  int                     // markers written
}

// Run runs one randomized run under t: a fresh cluster, workload, streams
// and faults; it returns what it found. Setup failures are t.Fatal.
func Run(t testing.TB, cfg Config) *Report {
	t.Helper()
	start := time.Now()
	r := &run{
		t: t, cfg: cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0xfa175)),
		report:  &Report{Seed: cfg.Seed, Faults: map[Kind]int{}},
		streams: map[string]*Stream{},
	}
	r.setup()
	t.Logf("%v: cluster, %d streams and the curator client up", time.Since(start).Round(time.Millisecond), len(r.streams))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.work.Run(ctx, cfg.Rate)
	}()
	for _, k := range r.plan() {
		if !r.work.WaitWrites(ctx, 20, false, time.Minute) {
			r.problem("the workload made no progress for a minute before %s", k)
		}
		all, _ := r.work.Writes()
		t.Logf("%v: fault %s (%d writes so far)", time.Since(start).Round(time.Millisecond), k, all)
		r.inject(ctx, k)
		r.report.Faults[k]++
	}
	cancel()
	wg.Wait()
	r.report.Writes, _ = r.work.Writes()
	r.heal()
	t.Logf("%v: faults done, every process runs; waiting for every stream to equal etcd", time.Since(start).Round(time.Millisecond))
	r.converge()
	t.Logf("%v: every stream compared (%d divergences)", time.Since(start).Round(time.Millisecond), len(r.report.Divergences))
	for _, s := range r.streams {
		st := s.State()
		r.report.Events += st.Events
		if err := st.Violation; err != nil {
			r.report.Violations = append(r.report.Violations, fmt.Sprintf("%s: %v", s.Name, err))
		}
	}
	cst := r.curator.State()
	r.report.Events += cst.Events
	if err := cst.Violation; err != nil {
		r.report.Violations = append(r.report.Violations, err.Error())
	}
	r.report.Duration = time.Since(start)
	return r.report
}

// plan returns the faults to inject: kinds shuffled, every kind once
// before any twice.
func (r *run) plan() []Kind {
	var out []Kind
	for len(out) < r.cfg.Faults {
		ks := Kinds()
		r.rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		out = append(out, ks...)
	}
	return out[:r.cfg.Faults]
}

func (r *run) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.t.Logf("problem: %s", msg)
	r.report.Problems = append(r.report.Problems, msg)
}

// setup starts the cluster, fills it, and starts every stream.
func (r *run) setup() {
	t := r.t
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	c, err := StartCluster(r.cfg.Exe, t.TempDir(), host, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	r.cluster = c
	t.Cleanup(c.Close)
	if r.client, err = c.Client(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.client.Close() })
	r.work = NewWorkload(r.client, r.cfg.Seed, 1000, 30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.work.Populate(ctx); err != nil {
		t.Fatal(err)
	}
	nodes, err := Nodes(ctx, r.client, "")
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range nodes {
			if !yield(id) {
				return
			}
		}
	})
	r.nodeID = ids[r.rng.IntN(len(ids))]

	for _, ep := range c.Endpoints {
		r.proxies = append(r.proxies, etcdtest.NewProxy(t, ep))
	}
	r.pinned = r.rng.IntN(3)
	r.keyFwd = r.forwarder(r.memberAddrs()[r.pinned])
	var addrs, nodesAddrs []string
	for i := range 2 {
		addr, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			t.Fatal(err)
		}
		// serve reaches etcd through forwarders of its own, for the
		// silent-serve-etcd fault.
		var fwd []*netfault.Forwarder
		var eps []string
		for _, m := range r.memberAddrs() {
			f := r.forwarder(m)
			fwd, eps = append(fwd, f), append(eps, "http://"+f.Addr())
		}
		r.rng.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
		s, err := StartServer(r.cfg.Bin, r.cfg.Env, addr, "--etcd", strings.Join(eps, ","), "--node-id", fmt.Sprintf("replica%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		r.servers, addrs = append(r.servers, s), append(addrs, addr)
		r.serveFwd = append(r.serveFwd, fwd)
		f := r.forwarder(addr)
		r.nodesFwd, nodesAddrs = append(r.nodesFwd, f), append(nodesAddrs, f.Addr())
	}
	var proxied []string
	for _, p := range r.proxies {
		proxied = append(proxied, p.Endpoint)
	}
	// --equals . prints every change of a key, revisions included, so
	// these replays must equal etcd exactly; the proxied one keeps the
	// default (.value), under which a re-put of the same value prints
	// nothing.
	// etcd's client keeps a connection to every endpoint it is given and
	// spreads calls over them; given one member only, the watcher is
	// connected to that member and no other (through a forwarder, for the
	// silent-etcd-watcher fault).
	r.keyAll = r.stream(fmt.Sprintf("key --prefix (m%d only)", r.pinned), true, "key", "--prefix", KeyPrefix, "--equals", ".", "--etcd", "http://"+r.keyFwd.Addr())
	r.keyCut = r.stream("key --prefix (proxied)", true, "key", "--prefix", KeyPrefix, "--etcd", strings.Join(proxied, ","))
	r.stream("key "+HotKey, true, "key", HotKey, "--equals", ".", "--etcd", r.endpoints())
	r.nodes = r.stream("nodes", false, "nodes", "--curator", strings.Join(nodesAddrs, ","))
	r.stream("node "+r.nodeID, false, "node", r.nodeID, "--curator", addrs[1]+","+addrs[0])
	r.curator = StartCuratorClient([]string{addrs[r.rng.IntN(2)], addrs[0]}, 80*time.Millisecond)
	t.Cleanup(r.curator.Close)
	if r.cfg.Etcdctl != "" {
		r.ctlFwd = r.forwarder(r.memberAddrs()[r.pinned])
		if r.ctlPin, err = StartEtcdctl(fmt.Sprintf("etcdctl (m%d only)", r.pinned), r.cfg.Etcdctl, "http://"+r.ctlFwd.Addr()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.ctlPin.Close)
		if r.ctlAll, err = StartEtcdctl("etcdctl (all members)", r.cfg.Etcdctl, strings.Join(r.cluster.Endpoints, ",")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.ctlAll.Close)
	}
	// Faults start once every stream has its initial state: a stream
	// stopped before that lists afresh when continued, which is not the
	// resync a fault is meant to provoke.
	for _, s := range r.streams {
		if !r.await(context.Background(), func() bool { return s.State().Synced }) {
			t.Fatalf("%s: no initial state after %v; stderr:\n%s", s.Name, r.cfg.Converge, s.Stderr())
		}
	}
	if !r.await(context.Background(), func() bool { return r.curator.State().Synced }) {
		t.Fatalf("curator client: no backlog after %v", r.cfg.Converge)
	}
}

// endpoints returns every member's client URL, in a random order.
func (r *run) endpoints() string {
	eps := slices.Clone(r.cluster.Endpoints)
	r.rng.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
	return strings.Join(eps, ",")
}

// forwarder returns a netfault.Forwarder to target, closed at the end.
func (r *run) forwarder(target string) *netfault.Forwarder {
	f, err := netfault.Listen(r.cluster.Host, target)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(f.Close)
	return f
}

func (r *run) stream(name string, revs bool, args ...string) *Stream {
	s, err := StartStream(name, r.cfg.Bin, r.cfg.Env, revs, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(s.Close)
	r.streams[name] = s
	return s
}

// memberAddrs returns the members' client host:port.
func (r *run) memberAddrs() []string {
	var out []string
	for _, ep := range r.cluster.Endpoints {
		out = append(out, strings.TrimPrefix(ep, "http://"))
	}
	return out
}

// inject injects one fault and undoes it (restarts what it killed,
// continues what it stopped) once it had its effect; then it waits for
// the streams the fault concerns to recover, and records how long they
// took.
func (r *run) inject(ctx context.Context, k Kind) {
	t := r.t
	m := r.measureStart(ctx, k)
	defer r.measureEnd(ctx, m)
	switch k {
	case LeaderKill:
		i, err := r.cluster.Leader(ctx)
		if err != nil {
			r.problem("%s: %v", k, err)
			return
		}
		t.Logf("  kill leader m%d", i)
		r.killMember(ctx, k, i, m)

	case WatchedMemberKill:
		i := r.pinned
		t.Logf("  kill m%d, the member %s is connected to (%d connections through its forwarder)", i, r.keyAll.Name, r.keyFwd.Open())
		r.killMember(ctx, k, i, m)

	case MemberPause:
		i := r.rng.IntN(3)
		t.Logf("  pause m%d", i)
		r.cluster.Pause(i)
		m.fault()
		if !r.work.WaitWrites(ctx, 60, false, time.Minute) {
			r.problem("%s: no 60 writes within a minute with m%d paused", k, i)
		}
		r.cluster.Resume(i)
		m.undone()

	case CompactionCut:
		before := r.keyCut.State().Resyncs
		r.keyCut.Stop()
		for _, p := range r.proxies {
			p.Cut()
		}
		if !r.work.WaitWrites(ctx, 20, true, time.Minute) {
			r.problem("%s: no 20 writes within a minute", k)
		}
		rev, err := r.compact(ctx)
		if err != nil {
			r.problem("%s: %v", k, err)
		}
		t.Logf("  compacted at rev %d with %s stopped and cut off", rev, r.keyCut.Name)
		for _, p := range r.proxies {
			p.Restore()
		}
		r.keyCut.Cont()
		if !r.await(ctx, func() bool { return r.keyCut.State().Resyncs > before }) {
			r.problem("%s: %s printed no resync batch within %v of the compaction", k, r.keyCut.Name, r.cfg.Converge)
		}

	case ServeRestart:
		i, sig := r.rng.IntN(2), []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}[r.rng.IntN(2)]
		t.Logf("  %v serve replica %d, start it again", sig, i)
		r.servers[i].Stop(sig)
		m.fault()
		if err := r.servers[i].Start(); err != nil {
			r.problem("%s: %v", k, err)
		}
		m.undone()

	case ServeFailover:
		i := r.nodesReplica()
		t.Logf("  kill serve replica %d, which nodes is connected to", i)
		r.servers[i].Stop(syscall.SIGKILL)
		m.fault()
		moved := func() bool { return r.nodesReplica() == 1-i }
		if !r.await(ctx, moved) {
			r.problem("%s: nodes did not connect to replica %d within %v", k, 1-i, r.cfg.Converge)
		}
		if err := r.servers[i].Start(); err != nil {
			r.problem("%s: %v", k, err)
		}
		m.undone()

	case ReaderPause:
		names := []string{r.keyAll.Name, r.keyCut.Name, r.nodes.Name, "curator client"}
		name := names[r.rng.IntN(len(names))]
		if name == "curator client" {
			r.curator.PauseReading()
			r.work.WaitWrites(ctx, 100, false, time.Minute)
			r.curator.ResumeReading()
			t.Logf("  paused the curator client for 100 writes")
			return
		}
		s := r.streams[name]
		s.PauseReading()
		full := false
		for range 60 {
			if full = s.Buffered() >= 48<<10; full {
				break
			}
			r.work.WaitWrites(ctx, 10, false, 10*time.Second)
		}
		t.Logf("  paused reading %s: %d bytes in its pipe", name, s.Buffered())
		s.ResumeReading()

	case SilentEtcdWatcher:
		n := r.keyFwd.Open()
		r.keyFwd.Silence()
		r.silenceEtcdctl()
		m.fault()
		t.Logf("  silenced %s's %d connections to m%d", r.keyAll.Name, n, r.pinned)
		if n == 0 {
			r.problem("%s: %s had no connection to silence", k, r.keyAll.Name)
		}

	case SilentServeEtcd:
		i, n := r.nodesReplica(), 0
		for _, f := range r.serveFwd[i] {
			n += f.Open()
			f.Silence()
		}
		r.silenceEtcdctl()
		m.fault()
		t.Logf("  silenced serve replica %d's %d connections to etcd (nodes is connected to it)", i, n)
		if n == 0 {
			r.problem("%s: serve replica %d had no connection to etcd to silence", k, i)
		}

	case SilentNodesServe:
		i := r.nodesReplica()
		n := r.nodesFwd[0].Open() + r.nodesFwd[1].Open()
		for _, f := range r.nodesFwd {
			f.Silence()
		}
		r.silenceEtcdctl()
		m.fault()
		t.Logf("  silenced nodes's %d connections (to serve replica %d)", n, i)
		if n == 0 {
			r.problem("%s: nodes had no connection to silence", k)
		}

	case QuorumLoss:
		perm := r.rng.Perm(3)
		a, b, alive := perm[0], perm[1], perm[2]
		kill := r.rng.IntN(2) == 0
		if kill {
			t.Logf("  kill m%d and m%d", a, b)
			r.cluster.Kill(a)
			r.cluster.Kill(b)
		} else {
			t.Logf("  pause m%d and m%d", a, b)
			r.cluster.Pause(a)
			r.cluster.Pause(b)
		}
		m.fault()
		if !r.await(ctx, func() bool { return !r.cluster.HasLeader(ctx, alive) }) {
			r.problem("%s: m%d still has a leader %v after losing both peers", k, alive, r.cfg.Converge)
		}
		if !r.work.WaitFailures(ctx, 5, time.Minute) {
			r.problem("%s: no 5 failed writes within a minute without a quorum", k)
		}
		t.Logf("  m%d has no leader, writes fail; bring m%d and m%d back", alive, a, b)
		for _, i := range []int{a, b} {
			if kill {
				if err := r.cluster.Restart(i); err != nil {
					r.problem("%s: restart m%d: %v", k, i, err)
				}
			} else {
				r.cluster.Resume(i)
			}
		}
		m.undone()

	case MemberPartition:
		i := r.pinned
		r.cluster.Isolate(i)
		m.fault()
		t.Logf("  cut m%d (watched by %s) off from its peers", i, r.keyAll.Name)
		// etcd cancels the watches WithRequireLeader of a member that has
		// had no leader for three election timeouts (3s): hold until the
		// member has said it has none for longer than that, and the others
		// took writes. (The workload is slow meanwhile: the calls its
		// client sends to the cut-off member time out.)
		var since time.Time
		if !r.await(ctx, func() bool {
			switch {
			case r.cluster.HasLeader(ctx, i):
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			}
			return !since.IsZero() && time.Since(since) > 4*time.Second
		}) {
			r.problem("%s: m%d did not stay without a leader for 4s within %v of being cut off", k, i, r.cfg.Converge)
		}
		if !r.work.WaitWrites(ctx, 20, false, time.Minute) {
			r.problem("%s: no 20 writes within a minute with m%d cut off", k, i)
		}
		r.cluster.Reconnect()
		m.undone()
		t.Logf("  m%d reconnected", i)
	}
}

// nodesReplica returns the serve replica `nodes` is connected to (read
// from /proc), 0 when none.
func (r *run) nodesReplica() int {
	addrs := []string{r.nodesFwd[0].Addr(), r.nodesFwd[1].Addr()}
	if on := ConnectedTo(r.nodes.Pid(), addrs); len(on) > 0 {
		return on[0]
	}
	return 0
}

// silenceEtcdctl makes the pinned etcdctl's connections silent, as the
// fault made nodewatch's.
func (r *run) silenceEtcdctl() {
	if r.ctlFwd != nil {
		r.ctlFwd.Silence()
	}
}

// killMember kills member i, waits until the workload wrote through its
// absence, and restarts it.
func (r *run) killMember(ctx context.Context, k Kind, i int, m *measurement) {
	r.cluster.Kill(i)
	m.fault()
	if !r.work.WaitWrites(ctx, 20, false, time.Minute) {
		r.problem("%s: no 20 writes within a minute with m%d killed", k, i)
	}
	if err := r.cluster.Restart(i); err != nil {
		r.problem("%s: restart m%d: %v", k, i, err)
	}
	m.undone()
}

// compact compacts etcd at its current revision, retrying through
// elections for up to a minute.
func (r *run) compact(ctx context.Context) (int64, error) {
	var rev int64
	err := testkit.Poll(ctx, time.Minute, func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := r.client.Get(cctx, "compact", clientv3.WithCountOnly())
		if err == nil {
			rev = resp.Header.Revision
			_, err = r.client.Compact(cctx, rev, clientv3.WithCompactPhysical())
		}
		return err == nil, err
	})
	return rev, err
}

// await waits until cond holds, for up to cfg.Converge, and reports
// whether it does.
func (r *run) await(ctx context.Context, cond func() bool) bool {
	return testkit.Poll(ctx, r.cfg.Converge, func() (bool, error) { return cond(), nil }) == nil
}

// heal makes every process run again: members, proxies, replicas,
// stopped and paused streams.
func (r *run) heal() {
	if err := r.cluster.Heal(); err != nil {
		r.problem("heal the cluster: %v", err)
	}
	for _, p := range r.proxies {
		p.Restore()
	}
	for _, s := range r.servers {
		if err := s.Start(); err != nil {
			r.problem("heal: %v", err)
		}
	}
	for _, s := range r.streams {
		s.Cont()
		s.ResumeReading()
	}
	r.curator.ResumeReading()
}

// converge waits until every stream equals the source, each for up to
// cfg.Converge; a stream that does not is a divergence.
func (r *run) converge() {
	ctx := context.Background()
	check := func(name string, diff func() (string, error)) {
		last := ""
		ok := r.await(ctx, func() bool {
			d, err := diff()
			if err != nil {
				d = err.Error()
			}
			last = d
			return d == ""
		})
		if !ok {
			msg := fmt.Sprintf("%s: not the source's state after %v:\n%s", name, r.cfg.Converge, clip(last))
			if s := r.streams[name]; s != nil {
				msg += "\nits stderr:\n" + clip(s.Stderr())
			}
			r.report.Divergences = append(r.report.Divergences, msg)
		}
	}
	read := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }
	for _, s := range r.streams {
		if s.State().Ended {
			r.problem("%s ended: %s", s.Name, clip(s.Stderr()))
			continue
		}
		if s.State().Violation != nil {
			continue // the replay is meaningless after a broken rule
		}
		check(s.Name, func() (string, error) {
			c, cancel := read()
			defer cancel()
			var want map[string]any
			var err error
			switch {
			case strings.HasPrefix(s.Name, "key --prefix"):
				want, err = Keys(c, r.client, KeyPrefix, false)
			case strings.HasPrefix(s.Name, "key "):
				want, err = Keys(c, r.client, HotKey, true)
			case s.Name == "nodes":
				var nodes map[string]json.RawMessage
				nodes, err = Nodes(c, r.client, "")
				want = anyMap(nodes)
			default:
				var nodes map[string]json.RawMessage
				nodes, err = Nodes(c, r.client, r.nodeID)
				want = anyMap(nodes)
			}
			if err != nil {
				return "", err
			}
			if s == r.keyCut {
				return s.EqualValues(want), nil
			}
			return s.Equal(want), nil
		})
	}
	if r.curator.State().Violation == nil {
		check("curator client", func() (string, error) {
			c, cancel := read()
			defer cancel()
			want, err := Nodes(c, r.client, "")
			if err != nil {
				return "", err
			}
			return r.curator.Equal(want), nil
		})
	}
}

// clip shortens a report to its first 40 lines.
func clip(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("… %d more lines", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}
