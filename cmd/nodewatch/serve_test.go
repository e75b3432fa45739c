package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/etcdtest"
)

// TestServeFlagErrors: bad limits are usage errors (exit 2) that name
// the flag, before serve connects to anything.
func TestServeFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no streams", []string{"--max-streams", "0"}, "--max-streams: must be at least 1, got 0"},
		{"no streams per connection", []string{"--max-streams-per-conn", "0"}, "--max-streams-per-conn: must be between 1 and 4294967295, got 0"},
		{"too many per connection", []string{"--max-streams-per-conn", "4294967296"}, "--max-streams-per-conn: must be between 1 and 4294967295, got 4294967296"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// etcd is never reached: the flags are checked first.
			args := append([]string{"serve", "--etcd", "http://127.0.0.1:1"}, tc.args...)
			stdout, stderr, code := runSync(t, args...)
			if code != exitUsage || stdout != "" || stderr != "nodewatch: "+tc.want+"\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestServeStreamLimits: --max-streams and --max-streams-per-conn reach
// the server. Past --max-streams a Watch fails at once with
// ResourceExhausted and the open streams go on; once one ends, a new one
// is accepted. Past --max-streams-per-conn a gRPC client's stream waits.
func TestServeStreamLimits(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	c := etcdtest.Client(t, ep)
	putNode(t, c, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))

	t.Run("--max-streams", func(t *testing.T) {
		t.Parallel()
		_, addr := startServe(t, nil, "--etcd", ep, "--max-streams", "2")
		conn := dialPlain(t, addr)
		w1 := openWatch(t, conn)
		w2 := openWatch(t, dialPlain(t, addr))
		if w := openWatch(t, conn); status.Code(w.err) != codes.ResourceExhausted || !strings.Contains(w.err.Error(), "limit of 2 open streams") {
			t.Fatalf("third stream: %v; want ResourceExhausted naming the limit of 2", w.err)
		}
		putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
		w1.wantNode(t, idB)
		w2.wantNode(t, idB)

		// The stream counts until its handler returns, shortly after the
		// client cancelled it.
		w1.cancel()
		poll(t, "a stream accepted after one ended", func() bool {
			w := openWatch(t, conn)
			if w.err != nil && status.Code(w.err) != codes.ResourceExhausted {
				t.Fatalf("stream after one ended: %v", w.err)
			}
			return w.err == nil
		})
	})
	t.Run("--max-streams-per-conn", func(t *testing.T) {
		t.Parallel()
		_, addr := startServe(t, nil, "--etcd", ep, "--max-streams-per-conn", "1")
		conn := dialPlain(t, addr)
		w1 := openWatch(t, conn)
		queued := make(chan *watchStream, 1)
		go func() { queued <- openWatch(t, conn) }()
		select {
		case w := <-queued:
			t.Fatalf("second stream on the connection did not wait: %v", w.err)
		case <-time.After(quiet):
		}
		w1.cancel()
		select {
		case w := <-queued:
			if w.err != nil {
				t.Fatalf("queued stream: %v", w.err)
			}
		case <-time.After(timeout):
			t.Fatalf("queued stream not served within %v of the first ending", timeout)
		}
	})
}

// startServe runs serve on a free loopback port, with set (if not nil)
// applied to its env, waits until it serves and returns the run and its
// address.
func startServe(t *testing.T, set func(*env), args ...string) (*proc, string) {
	t.Helper()
	addr, err := embedetcd.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startEnv(t, set, append([]string{"serve", "--listen", addr}, args...)...)
	waitServing(t, p)
	return p, addr
}

// poll calls cond every few milliseconds until it holds; the test fails if
// it does not within timeout.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	return dial(t, addr, insecure.NewCredentials())
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// watchStream is a nodes_in_cluster Watch stream whose backlog has been read.
type watchStream struct {
	stream apipb.Curator_WatchClient
	cancel context.CancelFunc
	err    error // what the stream failed with before the end of its backlog
}

// openWatch opens a Watch stream on conn and reads its backlog.
func openWatch(t *testing.T, conn *grpc.ClientConn) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &watchStream{cancel: cancel}
	req := &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
	w.stream, w.err = apipb.NewCuratorClient(conn).Watch(ctx, req)
	for w.err == nil {
		var ev *apipb.WatchEvent
		if ev, w.err = w.recv(t); ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			break
		}
	}
	if w.err != nil {
		cancel()
	}
	return w
}

// recv receives the next event within timeout.
func (w *watchStream) recv(t *testing.T) (*apipb.WatchEvent, error) {
	t.Helper()
	type result struct {
		ev  *apipb.WatchEvent
		err error
	}
	c := make(chan result, 1)
	go func() {
		ev, err := w.stream.Recv()
		c <- result{ev, err}
	}()
	select {
	case r := <-c:
		return r.ev, r.err
	case <-time.After(timeout):
		w.cancel()
		t.Fatalf("no event within %v", timeout)
	}
	return nil, nil
}

// wantNode receives the next event, which must hold the node id.
func (w *watchStream) wantNode(t *testing.T, id string) {
	t.Helper()
	ev, err := w.recv(t)
	if err != nil || len(ev.GetNodes()) != 1 || !strings.HasSuffix(ev.GetNodes()[0].GetId(), id) {
		t.Fatalf("got %v, %v; want node %s", ev, err, id)
	}
}
