// Package curatortest holds what the tests of the Curator client and
// server share: node records in a real embedded etcd, a real gRPC server
// on loopback, Watch streams read with timeouts, and a log that tests can
// wait on.
package curatortest

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

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// Node returns a node record with its state and address set.
func Node(id string, state commonpb.NodeState, addr string) *apipb.Node {
	return &apipb.Node{
		Id:     id,
		State:  state,
		Status: &commonpb.NodeStatus{ExternalAddress: addr},
	}
}

// FullNode returns a node with every kind of field set.
func FullNode(id string) *apipb.Node {
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

// Store is a node record store in a real etcd.
type Store struct {
	t      *testing.T
	Etcd   *clientv3.Client
	URL    string // the client URL of etcd
	Prefix string
}

// NewStore starts an etcd for the test.
func NewStore(t *testing.T) *Store {
	t.Helper()
	url := etcdtest.Start(t)
	return &Store{t: t, Etcd: etcdtest.Client(t, url), URL: url, Prefix: curator.DefaultPrefix}
}

func (s *Store) Put(nodes ...*apipb.Node) {
	s.t.Helper()
	for _, n := range nodes {
		b, err := curator.EncodeRecord(n)
		if err != nil {
			s.t.Fatal(err)
		}
		etcdtest.Put(s.t, s.Etcd, s.Prefix+n.GetId(), string(b))
	}
}

func (s *Store) PutRaw(id, value string) {
	s.t.Helper()
	etcdtest.Put(s.t, s.Etcd, s.Prefix+id, value)
}

func (s *Store) Del(id string) {
	s.t.Helper()
	etcdtest.Delete(s.t, s.Etcd, s.Prefix+id)
}

// Logs records log lines and lets a test wait for one.
type Logs struct {
	t       *testing.T
	mu      sync.Mutex // guards lines
	lines   []string
	changed chan struct{} // capacity 1: "lines grew"
}

func NewLogs(t *testing.T) *Logs { return &Logs{t: t, changed: make(chan struct{}, 1)} }

func (l *Logs) Logf(format string, args ...any) {
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

// WaitFor waits until a line containing every one of subs was logged and
// returns it.
func (l *Logs) WaitFor(subs ...string) string {
	l.t.Helper()
	deadline := time.NewTimer(testkit.Timeout)
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
			l.t.Fatalf("no log line containing %q within %v", subs, testkit.Timeout)
		}
	}
}

// GRPCServer is a real gRPC server on loopback.
type GRPCServer struct {
	Addr string
	Stop func() // stops the server and waits for it; idempotent
}

// ServeGRPC serves svc on addr ("" picks a free loopback port) until stop
// or the end of the test.
func ServeGRPC(t *testing.T, addr string, svc interface{ Register(grpc.ServiceRegistrar) }) *GRPCServer {
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
	return &GRPCServer{Addr: l.Addr().String(), Stop: stop}
}

// WaitReady waits until the Curator svc holds its initial state: it serves
// svc on a loopback address of its own and reads a nodes_in_cluster stream
// up to the end of its backlog, which a server sends only once it has
// listed etcd. Tests call it before they serve svc where clients connect:
// a node_in_cluster client takes a server that stays silent for its Settle
// for one without the node, and listing etcd may take longer than that on
// a loaded machine.
func WaitReady(t *testing.T, svc interface{ Register(grpc.ServiceRegistrar) }) {
	t.Helper()
	g := ServeGRPC(t, "", svc)
	defer g.Stop()
	conn := Dial(t, g.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, NodesReq())
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("server not ready within %v: %v", testkit.Timeout, err)
		}
		if ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			return
		}
	}
}

// Dial returns a plaintext gRPC connection to addr, closed when the test
// ends.
func Dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Stream reads a Watch stream into a channel, so that tests can wait for
// an event with a timeout, or make sure none comes.
type Stream struct {
	t      *testing.T
	Events chan *apipb.WatchEvent // closed when the stream ends, after err is set
	Err    error
}

func NodesReq() *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
}

func NodeReq(id string) *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{NodeInCluster: &apipb.WatchRequest_NodeInCluster{NodeId: id}}}
}

// Watch opens a Watch stream for req on conn until the test ends.
func Watch(t *testing.T, conn *grpc.ClientConn, req *apipb.WatchRequest) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &Stream{t: t, Events: make(chan *apipb.WatchEvent)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.Events)
		for {
			ev, err := w.Recv()
			if err != nil {
				s.Err = err
				return
			}
			select {
			case s.Events <- ev:
			case <-ctx.Done():
				s.Err = ctx.Err()
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

// Next returns the next event; the stream must not end before it.
func (s *Stream) Next() *apipb.WatchEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if !ok {
			s.t.Fatalf("stream ended: %v", s.Err)
		}
		return ev
	case <-time.After(testkit.Timeout):
		s.t.Fatalf("no event within %v", testkit.Timeout)
	}
	return nil
}

// None makes sure no event arrives for a while.
func (s *Stream) None() {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		s.t.Fatalf("stream ended: %v", s.Err)
	case <-time.After(testkit.Quiet):
	}
}

// End waits for the stream to end and returns its error; no event may come
// first.
func (s *Stream) End() error {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		return s.Err
	case <-time.After(testkit.Timeout):
		s.t.Fatalf("stream did not end within %v", testkit.Timeout)
	}
	return nil
}

// Start runs r (a server) until the test ends, then cancels it and waits
// for it; an error other than context.Canceled fails the test.
func Start(t *testing.T, r interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}
