package server

import (
	"context"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// BenchmarkServerFanout100: one change to a node record in etcd, until all
// of 100 Watch streams (real gRPC over loopback) have received it. It
// measures the whole path: etcd put, the server's single etcd watch,
// decode, broadcast to 100 mailboxes, 100 stream sends and receives.
func BenchmarkServerFanout100(b *testing.B) {
	const streams = 100
	_, kv := etcdtest.StartWith(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := New(Config{Etcd: kv})
	go srv.Run(ctx)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(l)
	defer g.Stop()

	n := &apipb.Node{Id: "metropolis-bench", State: commonpb.NodeState_NODE_STATE_UP, Status: &commonpb.NodeStatus{ExternalAddress: "10.0.0.1"}}
	rec, _ := curator.EncodeRecord(n)
	if _, err := kv.Put(ctx, curator.DefaultPrefix+n.Id, string(rec)); err != nil {
		b.Fatal(err)
	}
	got := make(chan struct{}, streams)
	for i := 0; i < streams; i++ {
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		w, err := apipb.NewCuratorClient(conn).Watch(ctx, &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}})
		if err != nil {
			b.Fatal(err)
		}
		if ev, err := w.Recv(); err != nil || ev.Progress != apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			b.Fatalf("backlog: %v, %v", ev, err)
		}
		go func() {
			for {
				if _, err := w.Recv(); err != nil {
					return
				}
				got <- struct{}{}
			}
		}()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n.Status.ExternalAddress = "10.0.1." + strconv.Itoa(i%250) // differs from the previous state
		rec, _ := curator.EncodeRecord(n)
		if _, err := kv.Put(ctx, curator.DefaultPrefix+n.Id, string(rec)); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < streams; j++ {
			<-got
		}
	}
	b.ReportMetric(float64(b.N*streams)/b.Elapsed().Seconds(), "deliveries/s")
}
