package dial_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// messages is how many messages each test receives one at a time.
const messages = 200

// pingFrame is the size of an HTTP/2 PING frame: a 9-byte header and 8
// bytes of data. grpc-go's dynamic window writes one for every message
// that arrives alone (see dial.Window).
const pingFrame = 17

// counter forwards TCP connections to a target and counts the bytes that
// clients write.
type counter struct {
	addr    string
	written atomic.Int64
}

func newCounter(t *testing.T, target string) *counter {
	l := testkit.Listen(t)
	c := &counter{addr: l.Addr().String()}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, conn := range conns {
			conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				client.Close()
				server.Close()
				return
			}
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(client, server) }()
			go func() { defer wg.Done(); io.Copy(countingWriter{server, &c.written}, client) }()
		}
	}()
	return c
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (cw countingWriter) Write(b []byte) (int, error) {
	cw.n.Add(int64(len(b)))
	return cw.w.Write(b)
}

// checkQuiet fails t if the client wrote a ping's worth of bytes for a
// quarter of the messages it received one at a time, or more.
func checkQuiet(t *testing.T, c *counter, receive func(i int)) {
	t.Helper()
	receive(0)
	before := c.written.Load()
	for i := 1; i <= messages; i++ {
		receive(i)
	}
	if wrote := c.written.Load() - before; wrote >= messages*pingFrame/4 {
		t.Fatalf("the client wrote %d bytes back while it received %d messages one at a time (a ping is %d bytes)", wrote, messages, pingFrame)
	}
}

// TestEtcdWatchWritesLittle: a client of dial.Etcd that follows changes
// arriving one at a time does not answer each with a ping.
func TestEtcdWatchWritesLittle(t *testing.T) {
	endpoint := etcdtest.Start(t)
	writer := etcdtest.Client(t, endpoint)
	c := newCounter(t, strings.TrimPrefix(endpoint, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	client, err := dial.Etcd(ctx, dial.EtcdConfig{Endpoints: []string{"http://" + c.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	events := client.Watch(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if r := <-events; !r.Created {
		t.Fatalf("watch not created: %v", r.Err())
	}
	checkQuiet(t, c, func(i int) {
		etcdtest.Put(t, writer, fmt.Sprintf("k/%d", i%10), strings.Repeat("v", 200))
		if r, ok := <-events; !ok || r.Err() != nil || len(r.Events) != 1 {
			t.Fatalf("change %d: %v", i, r.Err())
		}
	})
}

// TestCuratorStreamWritesLittle: a connection of dial.Curator that
// receives a stream's messages one at a time does not answer each with a
// ping. The stream is gRPC's health Watch, served on loopback.
func TestCuratorStreamWritesLittle(t *testing.T) {
	l := testkit.Listen(t)
	hs := health.NewServer()
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	defer srv.Stop()
	c := newCounter(t, l.Addr().String())
	conn, err := dial.Curator(c.addr, dial.CuratorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // SERVICE_UNKNOWN
		t.Fatal(err)
	}
	checkQuiet(t, c, func(i int) {
		status := healthpb.HealthCheckResponse_SERVING
		if i%2 == 1 {
			status = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus("s", status)
		if r, err := stream.Recv(); err != nil || r.Status != status {
			t.Fatalf("message %d: %v, %v", i, r, err)
		}
	})
}
