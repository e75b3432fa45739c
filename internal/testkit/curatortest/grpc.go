package curatortest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

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
