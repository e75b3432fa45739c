// Package server is the server behind `nodewatch serve` (which
// internal/service runs as a process): a Curator-compatible Watch server
// over node records kept in etcd. However many streams it serves, it reads
// etcd through one list-then-watch (internal/etcdkv), keeps the current
// nodes in memory and hands each stream its own handoff.Queue, so a slow
// client never holds up etcd, the server or the other clients, never loses
// a deletion, and costs memory bounded by the number of nodes.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/view"
)

// Config configures a Server.
type Config struct {
	// Etcd reads the node records. Required. It must stay open until Run
	// has returned; the caller closes it.
	Etcd *clientv3.Client
	// EtcdConns, if set, holds Etcd's connections (see etcdkv.Watcher).
	EtcdConns *dial.Conns
	// Keepalive says how often the etcd watch must prove that it is
	// current; zero fields take the defaults.
	Keepalive dial.Keepalive
	// Prefix is the etcd prefix under which node records live, key =
	// Prefix + node id; "" means curator.DefaultPrefix.
	Prefix string
	// NodeID, Host and Port name this server in GetCurrentLeader
	// responses, which always call it the leader: all state lives in
	// etcd, so every replica can serve Watch. An unspecified Host ("",
	// 0.0.0.0, ::) is answered with the address the client reached this
	// server at. Host and Port should be
	// an address clients can reach it at; clients that follow a leader
	// connect there.
	NodeID string
	Host   string
	Port   int
	// Log receives what the server has to say: records that cannot be
	// decoded (with their key), etcd errors being retried, streams opened
	// and closed (info), bad requests and connections past MaxConns
	// (rarely), each connection closed and each event sent (debug). Nil
	// discards.
	Log *slog.Logger
	// Metrics, if set, counts what the server does (see Metrics).
	Metrics *Metrics
	// DrainTimeout is how long Serve gives open RPCs to end once its
	// context ends (see Serve); 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MaxBackoff caps the wait between etcd retries; 0 means 5s.
	MaxBackoff time.Duration
	// TLS, if set, is the certificate Serve serves with (nil: plaintext).
	// Serve reads its files again on every value of Reloads, and logs
	// what came of it: new connections get the new certificate, open
	// streams go on, and a failed reload keeps the certificate served.
	TLS     *dial.ServerTLS
	Reloads <-chan os.Signal
	// MaxConns is the number of client connections Serve keeps open at
	// once; past it, a new connection is closed as soon as it is accepted
	// (counted, and logged rarely). 0 means no limit.
	MaxConns int
	// NoReflection leaves gRPC server reflection out of Serve.
	NoReflection bool
}

// Server serves the Curator Watch RPC (apipb.CuratorServer) and
// CuratorLocal.GetCurrentLeader (apipb.CuratorLocalServer) over node
// records kept in etcd, as docs/reference.md describes the wire.
//
// One Run feeds all streams from a single etcd list-then-watch. It keeps
// the current nodes in memory (each as its binary protobuf encoding, by id); a resync after an etcd
// compaction or outage broadcasts only real differences (equal nodes have equal encodings).
// Each Watch stream has its own handoff.Queue, and everything the stream
// sends comes through it, the backlog included: broadcasting never
// blocks, and a stream that cannot keep up receives the latest state of
// each changed node, its intermediate states merged (as the Curator's
// Watch allows), without ever losing a deletion of a node it was sent. A record that cannot be decoded is logged with its key
// and skipped; streams go on. A short etcd outage goes unseen by streams:
// they stay open and catch up. But once etcd has not confirmed the view
// current for Config.Keepalive's Time + Timeout (a silent
// connection, etcd down, a member without a leader), the view may be
// wrong without anything saying so: every stream ends with
// codes.Unavailable, so that its client moves to another replica, and
// Watch and GetNodes refuse with codes.Unavailable until a confirmation
// from etcd is applied; the health service says NOT_SERVING meanwhile.
//
// Watch and GetCurrentLeader are called by gRPC, concurrently. Watch
// streams wait for Run to have read the initial state; once Run has
// returned, open and new streams end with codes.Unavailable. A Server is
// used for one Run.
type Server struct {
	apipb.UnimplementedCuratorServer
	apipb.UnimplementedCuratorLocalServer
	mgmtpb.UnimplementedManagementServer

	cfg    Config
	prefix string
	log    *slog.Logger
	m      *Metrics

	// streamIDs numbers the streams, for the logs.
	streamIDs atomic.Uint64
	// badRequests logs refusals for bad requests, rarely; tests may
	// change its interval before Serve, which holds back connections
	// refused as long.
	badRequests rareLog

	ready chan struct{} // closed by Run once nodes holds the initial state
	done  chan struct{} // closed by Run when it returns, after stopped is set

	// health answers grpc.health.v1: SERVING only while the view is
	// current (see setStale).
	health *health.Server

	mu      sync.Mutex // guards the fields below
	started bool       // Run was called
	isReady bool       // ready is closed
	stopped bool       // Run has returned; subscribers are closed
	// draining: Serve is shutting down; new streams are refused and the
	// health service says NOT_SERVING for good.
	draining bool
	// stale: the etcd watch has not confirmed that it is current for
	// Keepalive.Time + Keepalive.Timeout; streams are refused until a
	// confirmation is applied. confirmedAt is when the last one was.
	stale       bool
	confirmedAt time.Time
	nodes       *view.Follower // *record objects
	subs        map[*subscriber]struct{}
	// backlog is what nodes_in_cluster streams that subscribe now start
	// with; nil when the nodes changed since it was made (or none was).
	backlog *backlog

	// eventLimit, if set, replaces curator.MaxEventSize (a test hook).
	eventLimit int
}

var (
	_ apipb.CuratorServer      = (*Server)(nil)
	_ apipb.CuratorLocalServer = (*Server)(nil)
	_ mgmtpb.ManagementServer  = (*Server)(nil)
)

// subscriber is one Watch stream's view of the broadcast.
type subscriber struct {
	id string         // the node watched; "" for all
	q  *handoff.Queue // *sharedEvent objects; closed when the server stops
	// backlog (nodes_in_cluster) is what the stream sends before what q
	// holds; nil once sent.
	backlog *backlog
}

// errStopped ends subscribers' queues when Run returns.
var errStopped = errors.New("curator server stopped")

// errDraining ends subscribers' queues when Serve shuts down.
var errDraining = errors.New("this replica is shutting down; try another")

// errStale ends subscribers' queues when the view of etcd stops being
// current.
var errStale = errors.New("this replica cannot confirm that its view of etcd is current; try another")

// New returns a Server for cfg. Nothing happens until Run.
func New(cfg Config) *Server {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = curator.DefaultPrefix
	}
	equal := func(_ string, a, b any) (bool, error) {
		return a.(*record).equal(b.(*record)), nil
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) // until the initial state is read
	for _, svc := range healthServices {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:    cfg,
		log:    log,
		m:      cfg.Metrics,
		health: hs,
		prefix: prefix,
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
		nodes:  view.NewFollower(nil, equal),
		subs:   map[*subscriber]struct{}{},

		badRequests: rareLog{every: rareEvery},
	}
}

// Register registers s as the Curator, CuratorLocal and Management
// service on r, and the standard grpc.health.v1.Health service, which
// answers SERVING (for "" and for the Curator and Management services)
// only while s holds a current view of etcd.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	apipb.RegisterCuratorServer(r, s)
	apipb.RegisterCuratorLocalServer(r, s)
	mgmtpb.RegisterManagementServer(r, s)
	healthpb.RegisterHealthServer(r, s.health)
}

// Run reads the node records from etcd and broadcasts their changes to
// the Watch streams until ctx ends. It blocks; it returns ctx.Err(), or an
// error at once if the configuration is unusable or Run was called before.
// etcd errors are logged and retried, never returned. When Run returns,
// every Watch stream ends with codes.Unavailable.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	again := s.started
	s.started = true
	s.mu.Unlock()
	if again {
		return errors.New("curator server: Run called twice")
	}
	err := s.run(ctx)
	s.stop()
	return err
}

func (s *Server) run(ctx context.Context) error {
	if s.cfg.Etcd == nil {
		return errors.New("curator server: no etcd client configured")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &etcdkv.Watcher{
		Client: s.cfg.Etcd,
		Keys:   []string{s.prefix},
		Prefix: true,
		ID:     s.id,
		Decode: func(kv *mvccpb.KeyValue) (any, error) {
			id := s.id(string(kv.Key))
			if strings.Contains(id, "/") {
				return nil, fmt.Errorf("not a node record: id %q contains '/'", id)
			}
			n, err := curator.DecodeRecord(id, kv.Value)
			if err != nil {
				s.m.badRecord()
				return nil, err
			}
			wire, err := curator.EncodeRecordBinary(n)
			if err != nil {
				s.m.badRecord()
				return nil, err
			}
			h, err := curator.DecodeHealth(kv.Value)
			if err != nil {
				// The node is good; only what GetNodes adds is not.
				s.log.Warn("record's health is taken as unknown", "key", string(kv.Key), "error", err)
			}
			return newRecord(wire, h), nil
		},
		Logf: func(format string, args ...any) {
			s.log.Warn(fmt.Sprintf(format, args...), "component", "etcd")
		},
		MaxBackoff: s.cfg.MaxBackoff,
		Keepalive:  s.cfg.Keepalive,
		Conns:      s.cfg.EtcdConns,
		OnCurrent:  s.setStale,
		OnRestart: func(compacted bool) {
			if compacted {
				s.m.restarted(restartCompacted)
			} else {
				s.m.restarted(restartLost)
			}
		},
	}
	q := handoff.New(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.Close(w.Run(ctx, q))
	}()
	defer wg.Wait()
	for {
		b, err := q.Next(ctx)
		if err != nil {
			return err
		}
		if err := s.apply(b); err != nil {
			return err
		}
	}
}

func (s *Server) id(key string) string { return strings.TrimPrefix(key, s.prefix) }

// apply brings the current nodes up to date with b and hands what changed
// to every subscriber watching it. Holding mu throughout makes a
// subscription see either all of b (in its initial state) or none of it
// (as changes).
func (s *Server) apply(b flow.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []flow.Change
	err := s.nodes.Apply(b, func(ev flow.Event) error {
		switch ev.Type {
		case flow.New, flow.Updated:
			rec := ev.Object.(*record)
			if ev.Type == flow.Updated && bytes.Equal(ev.Prev.(*record).wire, rec.wire) {
				return nil // only its health changed, which Watch does not carry
			}
			// One event for every stream.
			changes = append(changes, flow.Change{ID: ev.ID, Object: share(rec.field)})
		case flow.Deleted:
			changes = append(changes, flow.Change{ID: ev.ID, Deleted: true})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply etcd batch: %w", err)
	}
	if !s.isReady && b.Synced {
		s.isReady = true
		close(s.ready)
		s.setServing(true)
	}
	if b.Confirmed || b.Full() {
		if s.stale {
			s.stale = false
			s.setServing(true)
			s.log.Info("etcd confirmed the view current: serving Watch and GetNodes again", "rev", b.Rev)
		}
		s.confirmedAt = time.Now()
	}
	s.m.applied(b.Rev, s.nodes.Set().Len(), len(changes) > 0)
	if len(changes) == 0 {
		return nil
	}
	s.backlog = nil
	for sub := range s.subs {
		if sub.id == "" {
			sub.q.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes})
			continue
		}
		// changes are in id order and hold each id once.
		if i, ok := slices.BinarySearchFunc(changes, sub.id, func(c flow.Change, id string) int {
			return strings.Compare(c.ID, id)
		}); ok {
			sub.q.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes[i : i+1]})
		}
	}
	return nil
}

// stop ends every subscription; Run calls it once when it returns.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.health.Shutdown()
	s.m.setCurrent(false)
	why := errStopped
	if s.draining {
		why = errDraining
	}
	for sub := range s.subs {
		sub.q.Close(why)
	}
	close(s.done)
}

// subscribe waits until the server has its initial state, then returns a
// subscriber that receives every later change. For nodes_in_cluster (id
// "") it starts with the backlog of the current nodes, which the stream
// sends before what its queue holds; for node_in_cluster its queue holds,
// as its first batch, the node if it exists. The caller must unsubscribe
// it.
func (s *Server) subscribe(ctx context.Context, st *stream, id string) (*subscriber, error) {
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason, err := s.refusal(); err != nil {
		st.refused(s.m, reason, err)
		return nil, err
	}
	if id == "" {
		if s.backlog == nil {
			s.backlog = newBacklog(s.nodes.Set())
		}
		sub := &subscriber{q: handoff.NewFrom(0, s.backlog.ids), backlog: s.backlog}
		s.countMerges(sub.q)
		s.subs[sub] = struct{}{}
		return sub, nil
	}
	initial := flow.Batch{Cause: flow.CauseInitial, Synced: true}
	if obj, ok := s.nodes.Set().Get(id); ok {
		initial.Changes = []flow.Change{{ID: id, Object: share(obj.(*record).field)}}
	}
	sub := &subscriber{id: id, q: handoff.New(0)}
	s.countMerges(sub.q)
	sub.q.Put(initial)
	s.subs[sub] = struct{}{}
	return sub, nil
}

// countMerges has q's merges counted in the metrics.
func (s *Server) countMerges(q *handoff.Queue) {
	if s.m != nil {
		q.OnMerge = s.m.merged
	}
}

// waitReady waits until the server has its initial state, or has
// stopped, or ctx ends (its status).
func (s *Server) waitReady(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-s.done:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

func (s *Server) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
}

// subscribers returns the number of open Watch streams (for tests).
func (s *Server) subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}
