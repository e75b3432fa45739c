package server

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// serveLimited serves a Server over st through Serve with lim's options,
// on loopback until the test ends, and returns its address.
func serveLimited(t *testing.T, st *curatortest.Store, lim Limits) string {
	t.Helper()
	s := New(Config{Etcd: st.Etcd, Prefix: st.Prefix, Log: curatortest.NewLogs(t).Logger()})
	l := testkit.Listen(t)
	serveUntilEnd(t, s, l, lim.ServerOptions(nil)...)
	return l.Addr().String()
}

// serveUntilEnd serves s on l with opts until the test ends, when Serve
// must return context.Canceled.
func serveUntilEnd(t *testing.T, s *Server, l net.Listener, opts ...grpc.ServerOption) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Serve: %v", err)
		}
	})
}

// openWatch opens a nodes_in_cluster stream on conn and reads its backlog.
// It returns the stream and what ends it, or the error the stream failed
// with before the end of its backlog.
func openWatch(t *testing.T, conn *grpc.ClientConn) (apipb.Curator_WatchClient, context.CancelFunc, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	t.Cleanup(cancel)
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, curatortest.NodesReq())
	for err == nil {
		var ev *apipb.WatchEvent
		if ev, err = w.Recv(); err == nil && ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			return w, cancel, nil
		}
	}
	cancel()
	return nil, nil, err
}

// TestLimitsMaxStreams: past MaxStreams (counted over all connections) a
// Watch fails at once with ResourceExhausted naming the limit; the open
// streams go on; once one ends, a new one is accepted.
func TestLimitsMaxStreams(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	addr := serveLimited(t, st, Limits{MaxStreams: 2})
	c1, c2 := curatortest.Dial(t, addr), curatortest.Dial(t, addr)

	w1, end1, err := openWatch(t, c1)
	if err != nil {
		t.Fatal(err)
	}
	w2, _, err := openWatch(t, c2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*grpc.ClientConn{c1, c2} {
		_, _, err := openWatch(t, c)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit of 2 open streams") {
			t.Fatalf("third stream: %v; want ResourceExhausted naming the limit of 2", err)
		}
	}

	st.Put(curatortest.Node("n2", up, "b"))
	for _, w := range []apipb.Curator_WatchClient{w1, w2} {
		if ev, err := w.Recv(); err != nil || ev.GetNodes()[0].GetId() != "n2" {
			t.Fatalf("open stream after a refusal: %v, %v", ev, err)
		}
	}

	// The server counts a stream as closed once its handler has returned,
	// shortly after the client cancelled it: until then, a new stream is
	// refused as above.
	end1()
	testkit.Eventually(t, func() error {
		_, _, err := openWatch(t, c1)
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("stream after one closed: %v", err)
		}
		return err
	})
}

// TestLimitsMaxStreamsPerConn: a gRPC client queues a stream past
// MaxStreamsPerConn until one of its connection's streams ends; other
// connections are not held up. A client that ignores the limit has the
// extra stream refused.
func TestLimitsMaxStreamsPerConn(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	addr := serveLimited(t, st, Limits{MaxStreamsPerConn: 1})
	c1 := curatortest.Dial(t, addr)
	_, end1, err := openWatch(t, c1)
	if err != nil {
		t.Fatal(err)
	}

	queued := make(chan error, 1)
	go func() {
		_, _, err := openWatch(t, c1)
		queued <- err
	}()
	select {
	case err := <-queued:
		t.Fatalf("second stream on the connection did not wait: %v", err)
	case <-time.After(testkit.Quiet):
	}
	if _, _, err := openWatch(t, curatortest.Dial(t, addr)); err != nil {
		t.Fatalf("stream on another connection: %v", err)
	}
	end1()
	select {
	case err := <-queued:
		if err != nil {
			t.Fatalf("queued stream: %v", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatalf("queued stream not served within %v of the first ending", testkit.Timeout)
	}

	h := dialH2(t, addr)
	h.watch(1)
	h.watch(3)
	f := h.next(func(f frame) bool { return f.typ == http2.FrameRSTStream })
	if f.stream != 3 || f.code != http2.ErrCodeRefusedStream {
		t.Fatalf("stream past the limit: %+v, want stream 3 reset with REFUSED_STREAM", f)
	}
}

// TestLimitsRecvMsgSize: a request larger than MaxRecvMsgSize fails with
// ResourceExhausted.
func TestLimitsRecvMsgSize(t *testing.T) {
	t.Parallel()
	addr := serveLimited(t, curatortest.NewStore(t), Limits{})
	w := curatortest.Watch(t, curatortest.Dial(t, addr), curatortest.NodeReq(strings.Repeat("x", MaxRecvMsgSize)))
	if err := w.End(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("request of %d bytes: %v, want ResourceExhausted", MaxRecvMsgSize, err)
	}
}

// TestLimitsKeepalive: a client may ping every second or so, even without
// a stream; one that pings faster is sent GOAWAY "too_many_pings" and
// disconnected. gRPC's own client will not ping more often than every 10s,
// so the client here speaks HTTP/2 itself.
func TestLimitsKeepalive(t *testing.T) {
	t.Parallel()
	addr := serveLimited(t, curatortest.NewStore(t), Limits{})

	t.Run("every 1.25s", func(t *testing.T) {
		t.Parallel()
		h := dialH2(t, addr)
		// The pace of the pings is what is under test, not a wait: each
		// ping goes at least 1.25s after the one before.
		var sent time.Time
		for i := range 4 {
			if i > 0 {
				<-time.After(time.Until(sent.Add(1250 * time.Millisecond)))
			}
			sent = time.Now()
			h.ping(byte(i))
			f := h.next(func(f frame) bool { return f.typ == http2.FramePing || f.typ == http2.FrameGoAway })
			if f.typ != http2.FramePing || f.ping != byte(i) {
				t.Fatalf("ping %d answered with %+v", i, f)
			}
		}
		select {
		case f := <-h.frames:
			if f.typ == http2.FrameGoAway {
				t.Fatalf("disconnected: %+v", f)
			}
		case <-time.After(testkit.Quiet):
		}
	})
	t.Run("back to back", func(t *testing.T) {
		t.Parallel()
		h := dialH2(t, addr)
		for i := range 4 {
			h.ping(byte(i))
		}
		f := h.next(func(f frame) bool { return f.typ == http2.FrameGoAway })
		if f.code != http2.ErrCodeEnhanceYourCalm || f.debug != "too_many_pings" {
			t.Fatalf("GOAWAY %+v, want ENHANCE_YOUR_CALM too_many_pings", f)
		}
		if f := h.next(func(frame) bool { return false }); f.typ != eof {
			t.Fatalf("after GOAWAY: %+v, want the connection closed", f)
		}
	})
}

// h2 is a plaintext HTTP/2 client that does what the test says, whatever
// the server announced. It acknowledges the server's pings, as a client
// must for the server to close a connection it drains at once.
type h2 struct {
	t      *testing.T
	conn   net.Conn
	mu     sync.Mutex    // guards writes to fr: the test's and the acks
	fr     *http2.Framer // written under mu
	frames chan frame    // what the server sent; closed after an eof frame
}

// frame is what the tests look at of a frame the server sent.
type frame struct {
	typ    http2.FrameType
	stream uint32
	code   http2.ErrCode
	debug  string // GOAWAY
	ping   byte   // PING ack: its first byte
	// maxHeaderList is what SETTINGS announce as
	// SETTINGS_MAX_HEADER_LIST_SIZE, if they do.
	maxHeaderList uint32
}

// eof is the frame type of the end of the connection.
const eof http2.FrameType = 0xff

func dialH2(t *testing.T, addr string) *h2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	h := &h2{t: t, conn: conn, fr: http2.NewFramer(conn, conn), frames: make(chan frame, 100)}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(h.frames)
		r := http2.NewFramer(nil, conn)
		for {
			f, err := r.ReadFrame()
			if err != nil {
				h.frames <- frame{typ: eof} // the channel has room: see below
				return
			}
			got := frame{typ: f.Header().Type, stream: f.Header().StreamID}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				got.code, got.debug = f.ErrCode, string(f.DebugData())
			case *http2.RSTStreamFrame:
				got.code = f.ErrCode
			case *http2.SettingsFrame:
				got.maxHeaderList, _ = f.Value(http2.SettingMaxHeaderListSize)
			case *http2.PingFrame:
				if !f.IsAck() {
					h.mu.Lock()
					h.fr.WritePing(true, f.Data) // an error shows as the connection's end
					h.mu.Unlock()
					continue
				}
				got.ping = f.Data[0]
			}
			// Leave room for eof; a test that stopped reading is over.
			if len(h.frames) == cap(h.frames)-1 {
				return
			}
			h.frames <- got
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return h
}

// next returns the next frame that want accepts, or eof.
func (h *h2) next(want func(frame) bool) frame {
	h.t.Helper()
	deadline := time.After(testkit.Timeout)
	for {
		select {
		case f := <-h.frames:
			if f.typ == eof || want(f) {
				return f
			}
		case <-deadline:
			h.t.Fatalf("no such frame within %v", testkit.Timeout)
		}
	}
}

func (h *h2) ping(b byte) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fr.WritePing(false, [8]byte{b}); err != nil {
		h.t.Fatal(err)
	}
}

// watch opens a Watch stream (its headers, no request yet), with the
// metadata md.
func (h *h2) watch(stream uint32, md ...hpack.HeaderField) {
	h.t.Helper()
	if err := h.writeWatch(stream, md...); err != nil {
		h.t.Fatal(err)
	}
}

// writeWatch writes the headers of watch, in frames of at most 16 KiB
// (HTTP/2's least frame size): a HEADERS frame and CONTINUATION frames.
// HPACK sends a field that is in its table already as its index.
func (h *h2) writeWatch(stream uint32, md ...hpack.HeaderField) error {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "test"},
		{":path", "/" + apipb.Curator_ServiceDesc.ServiceName + "/Watch"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range md {
		enc.WriteField(f)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	const frameSize = 16 << 10
	block := b.Bytes()
	first := block[:min(len(block), frameSize)]
	block = block[len(first):]
	err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: first, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		next := block[:min(len(block), frameSize)]
		block = block[len(next):]
		err = h.fr.WriteContinuation(stream, len(block) == 0, next)
	}
	return err
}
