package curator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
	"github.com/nodewatch/nodewatch/internal/etcdtest"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/nodeset"
)

// Test timeouts: how long to wait for what should happen, and how long to
// watch for what must not.
const (
	timeout = etcdtest.Timeout
	quiet   = 100 * time.Millisecond
)

// node returns a node record with its state and address set.
func node(id string, state commonpb.NodeState, addr string) *apipb.Node {
	return &apipb.Node{
		Id:     id,
		State:  state,
		Status: &commonpb.NodeStatus{ExternalAddress: addr},
	}
}

// fullNode returns a node with every kind of field set.
func fullNode(id string) *apipb.Node {
	return &apipb.Node{
		Id: id,
		Roles: &commonpb.NodeRoles{
			KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{},
			ConsensusMember: &commonpb.NodeRoles_ConsensusMember{
				CaCertificate: []byte{0xca, 0xfe},
				Peers:         []*commonpb.NodeRoles_ConsensusMember_Peer{{Name: "p", Url: "https://192.0.2.1:7834"}},
			},
		},
		Status: &commonpb.NodeStatus{
			ExternalAddress: "192.0.2.1",
			Timestamp:       timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			RunningCurator:  &commonpb.NodeStatus_RunningCurator{Port: 7835},
			Version: &versionpb.Version{
				Release: &versionpb.Version_Release{Major: 1, Minor: 2, Patch: 3},
				GitInformation: &versionpb.Version_GitInformation{
					CommitHash:          "abc",
					CommitsSinceRelease: 5,
					BuildTreeState:      versionpb.Version_GitInformation_BUILD_TREE_STATE_CLEAN,
				},
			},
			BootId: []byte{1, 2, 3},
		},
		Clusternet: &commonpb.NodeClusterNetworking{
			WireguardPubkey: "key",
			Prefixes:        []*commonpb.NodeClusterNetworking_Prefix{{Cidr: "10.0.0.0/24"}},
		},
		State:  commonpb.NodeState_NODE_STATE_UP,
		Labels: &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "k", Value: "v"}}},
	}
}

// store is a node record store in a real etcd.
type store struct {
	t      *testing.T
	etcd   *clientv3.Client
	url    string // the client URL of etcd
	prefix string
}

// newStore starts an etcd for the test.
func newStore(t *testing.T) *store {
	t.Helper()
	url := etcdtest.Start(t)
	return &store{t: t, etcd: etcdtest.Client(t, url), url: url, prefix: DefaultPrefix}
}

func (s *store) put(nodes ...*apipb.Node) {
	s.t.Helper()
	for _, n := range nodes {
		b, err := EncodeRecord(n)
		if err != nil {
			s.t.Fatal(err)
		}
		etcdtest.Put(s.t, s.etcd, s.prefix+n.GetId(), string(b))
	}
}

func (s *store) putRaw(id, value string) {
	s.t.Helper()
	etcdtest.Put(s.t, s.etcd, s.prefix+id, value)
}

func (s *store) del(id string) {
	s.t.Helper()
	etcdtest.Delete(s.t, s.etcd, s.prefix+id)
}

// logs records log lines and lets a test wait for one.
type logs struct {
	t       *testing.T
	mu      sync.Mutex // guards lines
	lines   []string
	changed chan struct{} // capacity 1: "lines grew"
}

func newLogs(t *testing.T) *logs { return &logs{t: t, changed: make(chan struct{}, 1)} }

func (l *logs) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until a line containing every one of subs was logged and
// returns it.
func (l *logs) waitFor(subs ...string) string {
	l.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		i := slices.IndexFunc(l.lines, func(line string) bool {
			for _, s := range subs {
				if !strings.Contains(line, s) {
					return false
				}
			}
			return true
		})
		var line string
		if i >= 0 {
			line = l.lines[i]
		}
		l.mu.Unlock()
		if i >= 0 {
			return line
		}
		select {
		case <-l.changed:
		case <-deadline.C:
			l.t.Fatalf("no log line containing %q within %v", subs, timeout)
		}
	}
}

// startServer runs a Server for cfg until the test ends.
func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	s := NewServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Server.Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// grpcServer is a real gRPC server on loopback.
type grpcServer struct {
	addr string
	stop func() // stops the server and waits for it; idempotent
}

// serveGRPC serves svc on addr ("" picks a free loopback port) until stop
// or the end of the test.
func serveGRPC(t *testing.T, addr string, svc interface{ Register(grpc.ServiceRegistrar) }) *grpcServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	svc.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(l)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			g.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return &grpcServer{addr: l.Addr().String(), stop: stop}
}

// dial returns a plaintext gRPC connection to addr, closed when the test
// ends.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// stream reads a Watch stream into a channel, so that tests can wait for
// an event with a timeout, or make sure none comes.
type stream struct {
	t      *testing.T
	events chan *apipb.WatchEvent // closed when the stream ends, after err is set
	err    error
}

func nodesReq() *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
}

func nodeReq(id string) *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{NodeInCluster: &apipb.WatchRequest_NodeInCluster{NodeId: id}}}
}

// watch opens a Watch stream for req on conn until the test ends.
func watch(t *testing.T, conn *grpc.ClientConn, req *apipb.WatchRequest) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{t: t, events: make(chan *apipb.WatchEvent)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		for {
			ev, err := w.Recv()
			if err != nil {
				s.err = err
				return
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// next returns the next event; the stream must not end before it.
func (s *stream) next() *apipb.WatchEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("stream ended: %v", s.err)
		}
		return ev
	case <-time.After(timeout):
		s.t.Fatalf("no event within %v", timeout)
	}
	return nil
}

// none makes sure no event arrives for a while.
func (s *stream) none() {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		s.t.Fatalf("stream ended: %v", s.err)
	case <-time.After(quiet):
	}
}

// end waits for the stream to end and returns its error; no event may come
// first.
func (s *stream) end() error {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		return s.err
	case <-time.After(timeout):
		s.t.Fatalf("stream did not end within %v", timeout)
	}
	return nil
}

// running is a Client running until the test ends.
type running struct {
	t    *testing.T
	mb   *handoff.Queue
	done chan struct{} // closed when Run has returned, after err is set
	err  error
}

// startClient runs c until the test ends.
func startClient(t *testing.T, c *Client) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, mb: handoff.New(0), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = c.Run(ctx, r.mb)
		r.mb.Close(r.err)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// next returns the next batch, changes in id order.
func (r *running) next() nodeset.Batch {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b, err := r.mb.Next(ctx)
	if err != nil {
		r.t.Fatalf("no batch: %v", err)
	}
	slices.SortFunc(b.Changes, func(x, y nodeset.Change) int { return strings.Compare(x.ID, y.ID) })
	return b
}

// none makes sure no batch arrives for a while.
func (r *running) none() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	if b, err := r.mb.Next(ctx); err == nil {
		r.t.Fatalf("unexpected batch %+v", b)
	}
}

// wait waits for Run to return and returns its error.
func (r *running) wait() error {
	r.t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		r.t.Fatalf("Run did not return within %v", timeout)
	}
	return nil
}
