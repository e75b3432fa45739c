//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

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
		// serve reaches etcd through forwarders of its own, for the
		// silent-serve-etcd fault. They listen first: a free port picked
		// for serve before them could be the one a forwarder then takes.
		var fwd []*netfault.Forwarder
		var eps []string
		for _, m := range r.memberAddrs() {
			f := r.forwarder(m)
			fwd, eps = append(fwd, f), append(eps, "http://"+f.Addr())
		}
		addr, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			t.Fatal(err)
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
