//go:build linux

package faults

import (
	"context"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/enum"
	"github.com/nodewatch/nodewatch/internal/testkit"
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
var kindNames = enum.Names[Kind]{
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
func (k Kind) String() string { return kindNames.String(k) }

// Kinds returns every kind of fault.
func Kinds() []Kind { return kindNames.Values() }

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
		// Until the pipe is three quarters full, when nodewatch's
		// writes are about to block: 48 KiB of Linux's 64 KiB, 192 KiB
		// of the 256 KiB nodewatch makes it. The writes allowed for it
		// grow with the pipe.
		size := s.PipeSize()
		full := false
		for range 60 * max(1, size/(64<<10)) {
			if full = s.Buffered() >= size*3/4; full {
				break
			}
			r.work.WaitWrites(ctx, 10, false, 10*time.Second)
		}
		t.Logf("  paused reading %s: %d bytes in its pipe of %d", name, s.Buffered(), size)
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
