package client

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

const (
	up    = commonpb.NodeState_NODE_STATE_UP
	fresh = commonpb.NodeState_NODE_STATE_NEW
)

// startServer runs a Curator server for cfg until the test ends.
func startServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s := server.New(cfg)
	curatortest.Start(t, s)
	return s
}

// served is what most tests here start with: a store holding some nodes,
// a log, and a server for the store on loopback.
type served struct {
	st  *curatortest.Store
	lg  *curatortest.Logs
	srv *server.Server
	g   *curatortest.GRPCServer
}

// serveNodes puts nodes in a new store and serves it (see serveStore).
func serveNodes(t *testing.T, nodes ...*apipb.Node) *served {
	t.Helper()
	s := &served{st: curatortest.NewStore(t), lg: curatortest.NewLogs(t)}
	s.st.Put(nodes...)
	s.srv, s.g = serveStore(t, s.st, s.lg)
	return s
}

// client returns a test client (see testClient) of s's log, for s's
// server.
func (s *served) client() *Client { return testClient(s.lg, s.g.Addr) }

// serveStore serves st's records over gRPC on loopback, once the server
// holds them.
func serveStore(t *testing.T, st *curatortest.Store, lg *curatortest.Logs) (*server.Server, *curatortest.GRPCServer) {
	t.Helper()
	return serveReady(t, "", server.Config{Etcd: st.Etcd, Prefix: st.Prefix, Log: lg.Logger(), MaxBackoff: 200 * time.Millisecond})
}

// serveReady runs a server for cfg and serves it on addr ("" picks a free
// loopback port) once it holds the records: a client connects to a server
// that answers at once, whatever the load, so that a node_in_cluster
// client's Settle measures the server's silence about a node, not how
// long it took to list etcd.
func serveReady(t *testing.T, addr string, cfg server.Config) (*server.Server, *curatortest.GRPCServer) {
	t.Helper()
	s := startServer(t, cfg)
	curatortest.WaitReady(t, s)
	return s, curatortest.ServeGRPC(t, addr, s)
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
func (r *running) next() flow.Batch {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	b, err := r.mb.Next(ctx)
	if err != nil {
		r.t.Fatalf("no batch: %v", err)
	}
	slices.SortFunc(b.Changes, func(x, y flow.Change) int { return strings.Compare(x.ID, y.ID) })
	return b
}

// none makes sure no batch arrives for a while.
func (r *running) none() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Quiet)
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
	case <-time.After(testkit.Timeout):
		r.t.Fatalf("Run did not return within %v", testkit.Timeout)
	}
	return nil
}
