package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// fastKeepalive: a view unconfirmed for 2s is stale (the default is 8s).
var fastKeepalive = dial.Keepalive{Time: time.Second, Timeout: time.Second}

// serveBehind serves st's records with the server's etcd connection
// through a forwarder, which the test can silence or block.
func serveBehind(t *testing.T, st *curatortest.Store, lg *curatortest.Logs) (*netfault.Forwarder, *curatortest.GRPCServer) {
	t.Helper()
	fwd, err := netfault.Listen("127.0.0.1", strings.TrimPrefix(st.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	conns := dial.NewConns()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	c, err := etcdkv.Connect(ctx, etcdkv.Config{Endpoints: []string{"http://" + fwd.Addr()}, Keepalive: fastKeepalive, Conns: conns}, st.Prefix, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := startServer(t, Config{Etcd: c, EtcdConns: conns, Keepalive: fastKeepalive, Prefix: st.Prefix, Log: lg.Logger(), MaxBackoff: 200 * time.Millisecond})
	return fwd, curatortest.ServeGRPC(t, "", s)
}

// TestServerStaleEndsStreams: a replica whose etcd cannot be reached (a
// partition: every byte dropped, nothing closed) ends its Watch streams
// with Unavailable, refuses new Watch and GetNodes calls, and serves again
// once etcd confirms its view, with the changes made meanwhile. Before,
// the streams stayed open and quiet for ever, and new ones got the old
// view.
func TestServerStaleEndsStreams(t *testing.T) {
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	lg := curatortest.NewLogs(t)
	fwd, g := serveBehind(t, st, lg)
	conn := curatortest.Dial(t, g.Addr)
	w := curatortest.Watch(t, conn, curatortest.NodesReq())
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", up, "a")), w.Next())

	fwd.Block()
	if err := w.End(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
	lg.WaitFor("ending Watch streams with UNAVAILABLE", "streams=1")
	if err := curatortest.Watch(t, conn, curatortest.NodesReq()).End(); status.Code(err) != codes.Unavailable {
		t.Fatalf("a new Watch while stale: %v, want Unavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	nodes, err := mgmtpb.NewManagementClient(conn).GetNodes(ctx, &mgmtpb.GetNodesRequest{})
	if err == nil {
		_, err = nodes.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("GetNodes while stale: %v, want Unavailable", err)
	}

	st.Put(curatortest.Node("n2", up, "b")) // while the replica cannot see it
	fwd.Heal()
	lg.WaitFor("serving Watch and GetNodes again")
	w = curatortest.Watch(t, conn, curatortest.NodesReq())
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", up, "a"), curatortest.Node("n2", up, "b")), w.Next())
}

// TestServerHealth: grpc.health.v1 answers NOT_SERVING while etcd is
// unreachable and SERVING once the view is current again, for the server
// and for the Curator service by name.
func TestServerHealth(t *testing.T) {
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	fwd, g := serveBehind(t, st, curatortest.NewLogs(t))
	hc := healthpb.NewHealthClient(curatortest.Dial(t, g.Addr))
	for _, step := range []struct {
		do   func()
		want healthpb.HealthCheckResponse_ServingStatus
	}{
		{func() {}, healthpb.HealthCheckResponse_SERVING},
		{fwd.Block, healthpb.HealthCheckResponse_NOT_SERVING},
		{fwd.Heal, healthpb.HealthCheckResponse_SERVING},
	} {
		step.do()
		for _, svc := range []string{"", apipb.Curator_ServiceDesc.ServiceName} {
			waitHealth(t, hc, svc, step.want)
		}
	}
}

// waitHealth waits until hc reports want for svc.
func waitHealth(t *testing.T, hc healthpb.HealthClient, svc string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := w.Recv()
		if err != nil {
			t.Fatalf("health of %q: no %v within %v (%v)", svc, want, testkit.Timeout, err)
		}
		if resp.GetStatus() == want {
			return
		}
	}
}
