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
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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
	// decoded (with their key), etcd errors being retried, connections
	// and streams opened and closed (info), each event sent (debug). Nil
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

// record is a node as the server keeps it: the node its record holds, as
// it is sent, and the health the record carries besides (for GetNodes;
// the Watch wire has none).
type record struct {
	wire   wireNode  // the end of field
	field  fieldNode // wire as Watch sends it
	health curator.Health
}

// newRecord returns the record of a node encoded as wire.
func newRecord(wire wireNode, h curator.Health) *record {
	field := appendNode(make([]byte, 0, nodeSize(wire)), wire)
	return &record{wire: wireNode(field[len(field)-len(wire):]), field: field, health: h}
}

func (r *record) equal(o *record) bool {
	return bytes.Equal(r.wire, o.wire) && r.health.Health == o.health.Health && r.health.Heartbeat.Equal(o.health.Heartbeat)
}

// wireNode is a node as the server keeps and sends it: the deterministic
// binary protobuf encoding of its Node message. A hundred thousand nodes
// cost what their encodings weigh, not what their decoded messages do;
// equal nodes have equal encodings; and a node is encoded once, not once
// for every stream it is sent on.
// It is what curator.EncodeRecordBinary makes of the Node.
type wireNode []byte

// fieldNode is a node as Watch sends it: a wireNode as field 1 (nodes) of
// a WatchEvent, as appendNode makes it. An event of one node is exactly
// these bytes, and a backlog event is a run of them; made once per node,
// they are shared by every stream and never modified.
type fieldNode []byte

// Field numbers of WatchEvent, for events put together from wireNodes.
const (
	fieldNodes          = 1
	fieldNodeTombstones = 3
	fieldTombstoneID    = 1
)

// appendNode appends n to the encoding of a WatchEvent, as one more of its
// nodes.
func appendNode(b []byte, n wireNode) []byte {
	b = protowire.AppendTag(b, fieldNodes, protowire.BytesType)
	return protowire.AppendBytes(b, n)
}

// nodeSize is what appendNode adds.
func nodeSize(n wireNode) int { return protowire.SizeTag(fieldNodes) + protowire.SizeBytes(len(n)) }

// event returns a WatchEvent whose nodes are the encoded nodes in raw (as
// appendNode makes them), followed by the progress field in the last
// event of a backlog: they travel as the message's unknown fields, which
// proto.Marshal writes out as they are, and which a reader decodes as the
// fields they are.
func event(raw []byte) *apipb.WatchEvent {
	ev := &apipb.WatchEvent{}
	ev.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return ev
}

// sharedEvent is an event made once and sent on many streams: the
// WatchEvent event makes of raw, and the bytes codec sends of it (raw,
// without a copy). gRPC's own codec marshals the WatchEvent. Nothing in
// it is modified once made.
type sharedEvent struct {
	*apipb.WatchEvent
	data mem.BufferSlice
}

// share returns the sharedEvent of raw.
func share(raw []byte) *sharedEvent {
	return &sharedEvent{WatchEvent: event(raw), data: mem.BufferSlice{mem.SliceBuffer(raw)}}
}

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
	}
}

// healthServices are the services whose health s reports by name, besides
// the server as a whole (""): those that need a current view.
var healthServices = []string{apipb.Curator_ServiceDesc.ServiceName, mgmtpb.Management_ServiceDesc.ServiceName}

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

// setServing sets what the health service answers; s.mu must be held.
func (s *Server) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for _, svc := range healthServices {
		s.health.SetServingStatus(svc, st)
	}
	s.m.setCurrent(serving)
}

// setStale is the etcd watcher's OnCurrent(false): the view can no
// longer be called current, so every open stream ends with Unavailable
// (its client moves to another replica) and new ones are refused until a
// confirmation from etcd is applied (see apply).
func (s *Server) setStale(current bool) {
	if current {
		return // apply decides, once what etcd confirmed is applied
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.stale {
		return
	}
	s.stale = true
	s.setServing(false)
	n := len(s.subs)
	for sub := range s.subs {
		sub.q.Close(errStale)
		delete(s.subs, sub)
	}
	deadline := s.cfg.Keepalive.Deadline()
	s.log.Warn("etcd has not confirmed the view current: ending Watch streams with UNAVAILABLE and refusing Watch and GetNodes until it does",
		"for", deadline, "streams", n)
}

// refusal returns the status a new stream is refused with and the reason
// (a reason label of Metrics), or nil; s.mu must be held.
func (s *Server) refusal() (reason string, err error) {
	switch {
	case s.draining:
		return refusedStopping, status.Error(codes.Unavailable, errDraining.Error())
	case s.stopped:
		return refusedStopping, status.Error(codes.Unavailable, errStopped.Error())
	case s.stale:
		return refusedNotCurrent, status.Errorf(codes.Unavailable, "%v (last confirmed %v ago)", errStale, time.Since(s.confirmedAt).Round(time.Second))
	}
	return "", nil
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
		Key:    s.prefix,
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

// Watch serves one Watch stream. nodes_in_cluster: the current
// nodes in id order, in events of at most curator.MaxEventSize, the last one
// marked PROGRESS_LAST_BACKLOGGED (an empty event with the marker when
// there are no nodes); then one event per change, holding one node or one
// tombstone. node_in_cluster: nothing until the node exists, then its
// state, its changes, and a tombstone when it is deleted. Encoded nodes are
// shared between streams and never modified.
//
// Errors: codes.InvalidArgument for an empty node id or one containing
// '/', codes.Unimplemented for an unset kind, codes.Unavailable once Run
// has returned; the stream's own context ending returns its status.
func (s *Server) Watch(req *apipb.WatchRequest, srv apipb.Curator_WatchServer) (err error) {
	ctx := srv.Context()
	st := s.openStream(ctx, "Watch")
	var id string
	switch k := req.GetKind().(type) {
	case *apipb.WatchRequest_NodesInCluster_:
	case *apipb.WatchRequest_NodeInCluster_:
		id = k.NodeInCluster.GetNodeId()
		if id == "" {
			err = status.Error(codes.InvalidArgument, "node_in_cluster: node_id must be set")
		} else if strings.Contains(id, "/") {
			err = status.Errorf(codes.InvalidArgument, "node_in_cluster: invalid node_id %q: contains '/'", id)
		}
	case nil:
		err = status.Error(codes.Unimplemented, "watch request kind not set")
	default:
		err = status.Errorf(codes.Unimplemented, "watch request kind %T not supported", k)
	}
	if err != nil {
		st.refused(s.m, refusedBadRequest, err)
		return err
	}
	sub, err := s.subscribe(ctx, st, id)
	if err != nil {
		return err
	}
	defer s.unsubscribe(sub)
	// The queue ends when the stream does: Next waits for the queue
	// alone, which costs less than waiting for it and ctx.
	stop := context.AfterFunc(ctx, func() { sub.q.Close(ctx.Err()) })
	defer stop()
	if id == "" {
		st.log.Info("stream opened", "kind", "nodes_in_cluster")
	} else {
		st.log.Info("stream opened", "kind", "node_in_cluster", "node", id)
	}
	defer func() { st.closed(err) }()

	if sub.backlog != nil {
		if err := s.sendBacklog(srv, st, sub.backlog); err != nil {
			return err
		}
		sub.backlog = nil
	}
	// known: the client has seen the node and not its deletion
	// (node_in_cluster only; a tombstone for a node the client never saw
	// would say nothing).
	known := false
	for first := id != ""; ; first = false {
		b, err := sub.q.Next(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return status.Error(codes.Unavailable, err.Error())
		}
		if b.Full() {
			if !first {
				// The wire has no way to say "this is everything now".
				return status.Error(codes.Internal, "curator server: a full state after the backlog")
			}
			if len(b.Changes) > 0 {
				if err := s.send(srv, st, b.Changes[0].Object.(*sharedEvent)); err != nil {
					return err
				}
				known = true
			}
			continue
		}
		slices.SortFunc(b.Changes, func(x, y flow.Change) int { return strings.Compare(x.ID, y.ID) })
		for _, c := range b.Changes {
			var ev any
			switch {
			case !c.Deleted:
				ev = c.Object.(*sharedEvent)
				known = true
			case id != "" && !known:
				continue
			default:
				ev = &apipb.WatchEvent{NodeTombstones: []*apipb.NodeTombstone{{NodeId: c.ID}}}
				known = false
			}
			if err := s.send(srv, st, ev); err != nil {
				return err
			}
		}
	}
}

// send sends ev (a *sharedEvent, or a *apipb.WatchEvent of its own) on a
// Watch stream, and counts it.
func (s *Server) send(srv apipb.Curator_WatchServer, st *stream, ev any) error {
	if err := srv.SendMsg(ev); err != nil {
		return err
	}
	var we *apipb.WatchEvent
	var size int
	switch ev := ev.(type) {
	case *sharedEvent:
		we, size = ev.WatchEvent, ev.data.Len()
	case *apipb.WatchEvent:
		we, size = ev, proto.Size(ev)
	}
	st.events++
	st.bytes += size
	s.m.sent(size)
	if st.debug {
		st.log.Debug("event sent", "nodes", countNodes(we), "tombstones", len(we.GetNodeTombstones()), "bytes", size)
	}
	return nil
}

// countNodes counts the nodes an event built by event() carries as its
// unknown fields (for the debug log).
func countNodes(ev *apipb.WatchEvent) int {
	n := 0
	for b := []byte(ev.ProtoReflect().GetUnknown()); len(b) > 0; {
		num, typ, l := protowire.ConsumeField(b)
		if l < 0 {
			break
		}
		if num == fieldNodes && typ == protowire.BytesType {
			n++
		}
		b = b[l:]
	}
	return n
}

// sendBacklog sends a nodes_in_cluster stream its backlog: bl's events.
func (s *Server) sendBacklog(srv apipb.Curator_WatchServer, st *stream, bl *backlog) error {
	limit := curator.MaxEventSize
	if s.eventLimit > 0 {
		limit = s.eventLimit
	}
	evs := bl.encoded(limit)
	unsent := len(bl.nodes)
	s.m.backlog(1, unsent)
	defer func() { s.m.backlog(-1, -unsent) }()
	for i, ev := range evs.events {
		if err := s.send(srv, st, ev); err != nil {
			return err
		}
		s.m.backlog(0, -evs.nodes[i])
		unsent -= evs.nodes[i]
	}
	return nil
}

// backlog is the start of every nodes_in_cluster stream that subscribes
// while the nodes are in one state: the events of its backlog, made once
// and sent to each of them, and the ids of its nodes, from which each of
// their queues starts (handoff.NewFrom). Nothing in it changes once made;
// the server makes a new one once the nodes have changed.
type backlog struct {
	ids   []string    // in order
	nodes []fieldNode // nodes[i] is ids[i]'s

	mu sync.Mutex // guards events
	// events are made by the first stream that sends them and shared by
	// those that send them at the same time; once none of them holds
	// them any more, the garbage collector may take them (and the next
	// stream makes them again), so that an idle server does not keep a
	// second copy of its nodes.
	events weak.Pointer[backlogEvents]
}

// backlogEvents are the events of a backlog, and how many nodes each
// holds.
type backlogEvents struct {
	events []*sharedEvent
	nodes  []int
}

// newBacklog returns the backlog of the nodes in set (*record objects).
func newBacklog(set *view.Set) *backlog {
	bl := &backlog{ids: make([]string, 0, set.Len()), nodes: make([]fieldNode, 0, set.Len())}
	set.Ascend(func(id string, obj any) bool {
		bl.ids = append(bl.ids, id)
		bl.nodes = append(bl.nodes, obj.(*record).field)
		return true
	})
	return bl
}

// encoded returns bl's events, made if nobody holds them: its nodes in
// events of at most limit bytes, the last one (possibly holding no nodes)
// marked PROGRESS_LAST_BACKLOGGED. The caller must not modify them. Safe
// for concurrent use.
func (bl *backlog) encoded(limit int) *backlogEvents {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if evs := bl.events.Value(); evs != nil {
		return evs
	}
	evs := backlogEventsOf(bl.nodes, limit)
	bl.events = weak.Make(evs)
	return evs
}

// progressLast is the progress field of the last event of a backlog:
// field 2 (progress), varint, PROGRESS_LAST_BACKLOGGED (1).
const progressLast = "\x10\x01"

// backlogEventsOf returns nodes in events of at most limit bytes, the
// last one (possibly holding no nodes) marked PROGRESS_LAST_BACKLOGGED.
func backlogEventsOf(nodes []fieldNode, limit int) *backlogEvents {
	// Every event reserves room for the progress field, so that the
	// last one fits too.
	marker := len(progressLast)
	rest := 0 // what the nodes not yet in an event weigh
	for _, n := range nodes {
		rest += len(n)
	}
	// Each event gets a buffer of the size it will have, so that a
	// backlog costs its own size once, not again in growing buffers.
	evs := &backlogEvents{}
	var raw []byte
	inRaw := 0
	for _, n := range nodes {
		if len(raw) > 0 && marker+len(raw)+len(n) > limit {
			evs.events = append(evs.events, share(raw))
			evs.nodes = append(evs.nodes, inRaw)
			raw, inRaw = nil, 0
		}
		if raw == nil {
			raw = make([]byte, 0, min(rest+marker, limit))
		}
		raw = append(raw, n...)
		inRaw++
		rest -= len(n)
	}
	evs.events = append(evs.events, share(append(raw, progressLast...)))
	evs.nodes = append(evs.nodes, inRaw)
	return evs
}

// GetCurrentLeader answers that this server is the leader, naming it by
// Config's NodeID, Host and Port, and keeps the stream open (as the
// Curator does, to announce changes) until the client's context ends or
// Run returns (codes.Unavailable).
func (s *Server) GetCurrentLeader(_ *apipb.GetCurrentLeaderRequest, srv apipb.CuratorLocal_GetCurrentLeaderServer) error {
	err := srv.Send(&apipb.GetCurrentLeaderResponse{
		LeaderNodeId: s.cfg.NodeID,
		LeaderHost:   advertisedHost(srv.Context(), s.cfg.Host),
		LeaderPort:   int32(s.cfg.Port),
		ThisNodeId:   s.cfg.NodeID,
	})
	if err != nil {
		return err
	}
	select {
	case <-srv.Context().Done():
		return status.FromContextError(srv.Context().Err()).Err()
	case <-s.done:
		return status.Error(codes.Unavailable, errStopped.Error())
	}
}

// advertisedHost is the leader_host to tell a client: the configured host,
// unless that is unspecified ("", 0.0.0.0, ::: serve listens on every
// interface), in which case the address the client reached this server at,
// which is one the client can reach.
func advertisedHost(ctx context.Context, host string) string {
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return host
	}
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		if h, _, err := net.SplitHostPort(p.LocalAddr.String()); err == nil {
			return h
		}
	}
	return host
}

// DefaultDrainTimeout is how long Serve gives open RPCs to end once it
// stops, when Config.DrainTimeout is 0: time for every client to be told
// (the status of a Watch stream reaches a client behind a full flow-control
// window only once it reads again), short beside a Kubernetes pod's
// default grace period of 30 seconds.
const DefaultDrainTimeout = 5 * time.Second

// Serve runs s and serves it over gRPC on l (with opts) until ctx ends or
// either fails. It blocks, and returns ctx.Err() when ctx ends, or the
// error s.Run or gRPC failed with. It closes l. It serves with
// ServerCodec, which sends the events every stream shares without a copy
// for each.
//
// When ctx ends, Serve drains:
//  1. the health service says NOT_SERVING, for good, and new streams are
//     refused (codes.Unavailable);
//  2. l is closed and every connection is sent an HTTP/2 GOAWAY, so that
//     clients open nothing more here;
//  3. every Watch and GetCurrentLeader stream ends with codes.Unavailable
//     ("shutting down; try another"), which moves clients that know other
//     replicas to them: a Watch never ends on its own;
//  4. open RPCs (GetNodes calls, statuses on their way) get
//     Config.DrainTimeout to end, and whatever is left is then closed.
func (s *Server) Serve(ctx context.Context, l net.Listener, opts ...grpc.ServerOption) error {
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	if s.cfg.TLS != nil {
		s.warnValidity()
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.TLS.Config())))
	}
	gs := grpc.NewServer(append([]grpc.ServerOption{ServerCodec()}, opts...)...)
	s.Register(gs)
	reflection.Register(gs)
	cl := newListener(l, s.log)

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.reloads(runCtx) })
	errc := make(chan error, 2)
	wg.Go(func() { errc <- s.Run(runCtx) })
	wg.Go(func() {
		if err := gs.Serve(cl); err != nil {
			errc <- fmt.Errorf("serve: %w", err)
		}
	})

	var err error
	select {
	case <-ctx.Done():
		err = ctx.Err()
	case err = <-errc:
	}
	s.drain()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	// GracefulStop closes the listener before it sends GOAWAY: once it
	// is closed, a client that is told to go elsewhere cannot come back.
	select {
	case <-cl.closed:
	case <-stopped:
	}
	stopRun() // Run ends every Watch stream
	timeout := cmp.Or(s.cfg.DrainTimeout, DefaultDrainTimeout)
	begun := time.Now()
	select {
	case <-stopped:
		s.log.Info("drained", "took", time.Since(begun).Round(time.Millisecond))
	case <-time.After(timeout):
		s.log.Warn("drain timeout: closing the connections left", "drain_timeout", timeout)
		gs.Stop()
		<-stopped
	}
	return err
}

// drain marks s as shutting down: new streams are refused, and the health
// service says NOT_SERVING from now on.
func (s *Server) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.draining = true
	s.health.Shutdown()
	s.m.setCurrent(false)
	s.log.Info("draining: NOT_SERVING, refusing new streams, sending GOAWAY and ending Watch streams", "streams", len(s.subs))
}

// reloads reads the TLS files again on every request, until ctx ends.
func (s *Server) reloads(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Reloads:
			s.reloadTLS()
		}
	}
}

// reloadTLS reads the TLS files again, and logs what came of it.
func (s *Server) reloadTLS() {
	t := s.cfg.TLS
	if t == nil {
		s.log.Info("reload requested: serving plaintext, nothing to reload")
		return
	}
	leaf, err := t.Reload()
	if err != nil {
		s.log.Error("reload failed, keeping the certificate", append(certAttrs(t.Leaf()), "error", err)...)
		return
	}
	files := []any{"cert_file", t.Cert.Path, "key_file", t.Key.Path}
	if t.ClientCA.Path != "" {
		files = append(files, "client_ca_file", t.ClientCA.Path)
	}
	s.log.Info("reloaded certificate", append(files, certAttrs(leaf)...)...)
	s.warnValidity()
}

// warnValidity warns when clients would refuse the certificate served.
func (s *Server) warnValidity() {
	if p := dial.ValidityProblem(s.cfg.TLS.Leaf(), time.Now()); p != "" {
		s.log.Warn(fmt.Sprintf("%s: %s; clients will refuse it", s.cfg.TLS.Cert, p))
	}
}

// certAttrs name a certificate in a log line.
func certAttrs(c *x509.Certificate) []any {
	return []any{"subject", c.Subject.String(), "serial", c.SerialNumber.String(), "expires", c.NotAfter.UTC().Format(time.RFC3339)}
}
