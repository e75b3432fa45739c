package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// guarded is a Server served through Serve on loopback until the test
// ends, with its metrics and its log (JSON lines, debug and above) at
// hand. Rare lines (rareLog) are held back for an hour: a line the test
// sees once it would see once however slow the machine.
type guarded struct {
	t       *testing.T
	addr    string
	metrics string // the URL of its /metrics
	log     *testkit.Buffer
}

func serveGuarded(t *testing.T, st *curatortest.Store, cfg Config, lim Limits) *guarded {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(hs.Close)
	g := &guarded{t: t, metrics: hs.URL, log: &testkit.Buffer{}}
	cfg.Etcd, cfg.Prefix, cfg.Metrics = st.Etcd, st.Prefix, m
	cfg.Log = slog.New(slog.NewJSONHandler(g.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := New(cfg)
	s.badRequests.every = time.Hour
	l := testkit.Listen(t)
	g.addr = l.Addr().String()
	serveUntilEnd(t, s, l, lim.ServerOptions(m)...)
	return g
}

// lines returns the log lines whose msg is msg and that have every
// attribute of attrs (compared as fmt prints them).
func (g *guarded) lines(msg string, attrs ...any) []map[string]any {
	g.t.Helper()
	var out []map[string]any
	for l := range strings.Lines(g.log.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			g.t.Fatalf("a log line that is not JSON: %q", l)
		}
		match := v["msg"] == msg
		for i := 0; match && i+1 < len(attrs); i += 2 {
			match = fmt.Sprint(v[attrs[i].(string)]) == fmt.Sprint(attrs[i+1])
		}
		if match {
			out = append(out, v)
		}
	}
	return out
}

// waitLine waits for the log line that lines would find, and returns it.
func (g *guarded) waitLine(msg string, attrs ...any) map[string]any {
	g.t.Helper()
	var found []map[string]any
	testkit.Eventually(g.t, func() error {
		if found = g.lines(msg, attrs...); len(found) == 0 {
			return fmt.Errorf("no log line %q with %v in:\n%s", msg, attrs, g.log)
		}
		return nil
	})
	return found[0]
}

// waitMetric waits until the series key of /metrics is want.
func (g *guarded) waitMetric(key string, want float64) {
	g.t.Helper()
	testkit.Eventually(g.t, func() error {
		if got := scrapeMetrics(g.t, g.metrics)[key]; got != want {
			return fmt.Errorf("%s = %v, want %v", key, got, want)
		}
		return nil
	})
}

// closedAtOnce connects to addr and returns nil if the server closes the
// connection without sending a byte. It sends nothing itself: a write
// to a connection the server has closed may fail.
func closedAtOnce(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testkit.Timeout))
	n, err := c.Read(make([]byte, 1))
	if n > 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		return fmt.Errorf("read %d bytes, %v; want the connection closed before a byte", n, err)
	}
	return nil
}

// anyFrame accepts every frame.
func anyFrame(frame) bool { return true }

// TestMaxConns: past MaxConns a connection is closed as soon as it is
// accepted, before the server says anything (a gRPC client's call fails
// with Unavailable); each is counted, one line at warn says so, the
// connections kept go on, and one closing makes room for another. Each
// connection kept is logged once, at debug, when it closes.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	g := serveGuarded(t, curatortest.NewStore(t), Config{MaxConns: 2}, Limits{})
	var kept []*h2
	for range 2 {
		h := dialH2(t, g.addr)
		if f := h.next(anyFrame); f.typ != http2.FrameSettings {
			t.Fatalf("a connection within the limit: %+v first, want SETTINGS", f)
		}
		kept = append(kept, h)
	}
	g.waitMetric(`nodewatch_serve_connections_open`, 2)

	for i := range 3 {
		if err := closedAtOnce(g.addr); err != nil {
			t.Fatalf("connection %d past the limit: %v", i+3, err)
		}
	}
	g.waitMetric(`nodewatch_serve_connections_refused_total`, 3)
	if got := g.lines("connection refused: at the limit of open connections"); len(got) != 1 ||
		got[0]["level"] != "WARN" || got[0]["max_connections"] != 2.0 || !strings.HasPrefix(fmt.Sprint(got[0]["peer"]), "127.0.0.1:") {
		t.Fatalf("log lines about connections refused: %v, want one at WARN naming max_connections=2 and the peer", got)
	}

	conn := curatortest.Dial(t, g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, curatortest.NodesReq())
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a gRPC call past the limit: %v, want Unavailable", err)
	}
	conn.Close()
	if got := scrapeMetrics(t, g.metrics)[`nodewatch_serve_connections_refused_total`]; got < 4 {
		t.Errorf("connections_refused_total = %v after the gRPC client's, want at least 4", got)
	}
	if got := g.lines("connection refused: at the limit of open connections"); len(got) != 1 {
		t.Errorf("%d lines about connections refused, want 1 (the others held back)", len(got))
	}

	// The connections kept were not disturbed.
	kept[1].ping(7)
	if f := kept[1].next(func(f frame) bool { return f.typ == http2.FramePing }); f.ping != 7 {
		t.Fatalf("a connection kept, after refusals: %+v, want the ping answered", f)
	}
	peer := kept[0].conn.LocalAddr().String()
	kept[0].conn.Close()
	g.waitMetric(`nodewatch_serve_connections_open`, 1)
	if l := g.waitLine("connection closed", "peer", peer); l["level"] != "DEBUG" || l["duration"] == nil {
		t.Errorf("the line of a connection closed: %v, want DEBUG with its duration", l)
	}
	if f := dialH2(t, g.addr).next(anyFrame); f.typ != http2.FrameSettings {
		t.Fatalf("a connection after one closed: %+v first, want SETTINGS", f)
	}
	if got := g.lines("connection opened"); len(got) != 0 {
		t.Errorf("connections logged as opened: %v; one line, when closed, is enough", got)
	}
}

// TestIdleTimeout: a connection without a stream for IdleTimeout is sent
// GOAWAY "max_idle" and closed (and logged and no longer counted); one
// with a stream open is not; a gRPC client whose connection was closed so
// connects again for its next call.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 200 * time.Millisecond
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	g := serveGuarded(t, st, Config{}, Limits{IdleTimeout: idle})

	h := dialH2(t, g.addr)
	if f := h.next(func(f frame) bool { return f.typ == http2.FrameGoAway }); f.code != http2.ErrCodeNo || f.debug != "max_idle" {
		t.Fatalf("an idle connection: %+v, want GOAWAY NO_ERROR max_idle", f)
	}
	if f := h.next(func(frame) bool { return false }); f.typ != eof {
		t.Fatalf("after GOAWAY max_idle: %+v, want the connection closed", f)
	}
	g.waitLine("connection closed", "peer", h.conn.LocalAddr().String())
	g.waitMetric(`nodewatch_serve_connections_open`, 0)

	w := curatortest.Watch(t, curatortest.Dial(t, g.addr), curatortest.NodesReq())
	w.Next() // the backlog
	// Past the timeout is what is under test, not a wait for something.
	<-time.After(3 * idle)
	st.Put(curatortest.Node("n2", up, "b"))
	if ev := w.Next(); ev.GetNodes()[0].GetId() != "n2" {
		t.Fatalf("a stream open past the idle timeout: %v, want n2", ev)
	}

	conn := curatortest.Dial(t, g.addr)
	if _, err := getNodes(t, conn, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	for s := conn.GetState(); s != connectivity.Idle; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the gRPC client's connection still %v %v after it went idle", s, testkit.Timeout)
		}
	}
	if nodes, err := getNodes(t, conn, ""); err != nil || len(nodes) != 2 {
		t.Fatalf("a call after the connection was closed as idle: %d nodes, %v", len(nodes), err)
	}
}

// TestHeaderListSize: the server announces MaxHeaderListSize; a gRPC
// client fails a call with more metadata itself (Internal). A client that
// sends it anyway has the stream reset (FRAME_SIZE_ERROR) if it fits in
// one frame (HPACK makes 75 KiB of fields out of 3 KiB), which is
// counted as a bad_request and logged, and its connection closed before
// the rest is read if it does not; gRPC does either before a stream
// reaches the server. Metadata within the limit is served.
func TestHeaderListSize(t *testing.T) {
	t.Parallel()
	g := serveGuarded(t, curatortest.NewStore(t), Config{}, Limits{})
	conn := curatortest.Dial(t, g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()

	within := metadata.AppendToOutgoingContext(ctx, "x-within", strings.Repeat("x", MaxHeaderListSize/2))
	w, err := apipb.NewCuratorClient(conn).Watch(within, curatortest.NodesReq())
	if err == nil {
		_, err = w.Recv()
	}
	if err != nil {
		t.Fatalf("a Watch with %d bytes of metadata: %v", MaxHeaderListSize/2, err)
	}
	over := metadata.AppendToOutgoingContext(ctx, "x-over", strings.Repeat("x", MaxHeaderListSize))
	w, err = apipb.NewCuratorClient(conn).Watch(over, curatortest.NodesReq())
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "header list size") {
		t.Fatalf("a Watch with %d bytes of metadata: %v, want Internal naming the header list size", MaxHeaderListSize, err)
	}

	h := dialH2(t, g.addr)
	if f := h.next(anyFrame); f.typ != http2.FrameSettings || f.maxHeaderList != MaxHeaderListSize {
		t.Fatalf("SETTINGS: %+v, want SETTINGS_MAX_HEADER_LIST_SIZE %d", f, MaxHeaderListSize)
	}
	var fields []hpack.HeaderField
	for range 25 {
		fields = append(fields, hpack.HeaderField{Name: "x-over", Value: strings.Repeat("x", 3000)})
	}
	h.watch(1, fields...)
	if f := h.next(func(f frame) bool { return f.typ == http2.FrameRSTStream || f.typ == http2.FrameGoAway }); f.typ != http2.FrameRSTStream ||
		f.stream != 1 || f.code != http2.ErrCodeFrameSize {
		t.Fatalf("a stream with 75 KiB of metadata in one frame: %+v, want it reset with FRAME_SIZE_ERROR", f)
	}
	g.waitMetric(badRequests, 1)
	l := g.waitLine("stream refused", "reason", "bad_request", "peer", h.conn.LocalAddr().String())
	if l["error"] != "header list larger than the limit" || l["max_header_list_size"] != float64(MaxHeaderListSize) {
		t.Errorf("the line of a stream reset for its headers: %v", l)
	}
	h.ping(1)
	if f := h.next(func(f frame) bool { return f.typ == http2.FramePing }); f.ping != 1 {
		t.Fatalf("the connection after a stream reset: %+v, want the ping answered", f)
	}

	h = dialH2(t, g.addr)
	h.writeWatch(1, hpack.HeaderField{Name: "x-over", Value: strings.Repeat("x", 1<<20)}) // fails once the server has closed
	if f := h.next(func(frame) bool { return false }); f.typ != eof {
		t.Fatalf("a stream with 1 MiB of metadata: %+v, want the connection closed", f)
	}
	g.waitLine("connection closed", "peer", h.conn.LocalAddr().String())

	if got := scrapeMetrics(t, g.metrics)[`nodewatch_serve_streams_open{method="Watch"}`]; got != 1 {
		t.Errorf("streams_open{method=Watch} = %v, want 1 (the stream within the limit)", got)
	}
	if got := g.lines("stream opened"); len(got) != 1 {
		t.Errorf("%d streams opened, want 1 (the stream within the limit): %v", len(got), got)
	}
}
