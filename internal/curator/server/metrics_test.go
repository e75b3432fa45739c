package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// scrape is one scrape of /metrics: each series' value, by name and
// labels ("name" or `name{label="value"}`).
type scrape map[string]float64

// scrapeMetrics GETs url and parses the text exposition.
func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	s := scrape{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			s[key] = value(m)
		}
	}
	return s
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// moved returns what differs between after - before and want (series not
// in want must not have moved), or "" if nothing does. Series named in
// absolute are compared by value, not by how they moved.
func moved(before, after scrape, want map[string]float64, absolute map[string]float64) string {
	var diffs []string
	for k, v := range after {
		if !strings.HasPrefix(k, "nodewatch_serve_") {
			continue
		}
		if w, ok := absolute[k]; ok {
			if v != w {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, v, w))
			}
			continue
		}
		if d := v - before[k]; d != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s moved by %v, want %v", k, d, want[k]))
		}
	}
	for k := range want {
		if _, ok := after[k]; !ok {
			diffs = append(diffs, k+" missing")
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// TestMetrics scrapes /metrics around a known run: GetNodes, Watch
// streams (one refused as a bad request, one at the stream limit), two
// changes, a bad record. Every counter must move by exactly what happened,
// and the gauges must say where things stand.
func TestMetrics(t *testing.T) {
	st := curatortest.NewStore(t)
	up := commonpb.NodeState_NODE_STATE_UP
	st.Put(curatortest.Node("n1", up, "10.0.0.1"), curatortest.Node("n2", up, "10.0.0.2"), curatortest.Node("n3", up, "10.0.0.3"))

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(hs.Close)
	s := New(Config{Etcd: st.Etcd, Prefix: st.Prefix, Log: curatortest.NewLogs(t).Logger(), Metrics: m})
	l := testkit.Listen(t)
	serveUntilEnd(t, s, l, Limits{MaxStreams: 2}.ServerOptions(m)...)
	conn := curatortest.Dial(t, l.Addr().String())
	if _, err := getNodes(t, conn, ""); err != nil { // waits for Run's initial state
		t.Fatal(err)
	}
	before := scrapeMetrics(t, hs.URL)
	rev := func() float64 {
		resp, err := st.Etcd.Get(context.Background(), "any")
		if err != nil {
			t.Fatal(err)
		}
		return float64(resp.Header.Revision)
	}

	// GetNodes: one call.
	if nodes, err := getNodes(t, conn, ""); err != nil || len(nodes) != 3 {
		t.Fatalf("GetNodes: %d nodes, %v", len(nodes), err)
	}
	sent := 0 // bytes of the events received
	recv := func(w *curatortest.Stream) *apipb.WatchEvent {
		ev := w.Next()
		sent += proto.Size(ev)
		return ev
	}
	all := curatortest.Watch(t, conn, curatortest.NodesReq())
	if ev := recv(all); ev.GetProgress() != apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED || len(ev.GetNodes()) != 3 {
		t.Fatalf("backlog: %v", ev)
	}
	bad := curatortest.Watch(t, conn, curatortest.NodeReq(""))
	if err := bad.End(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty node id: %v", err)
	}
	one := curatortest.Watch(t, conn, curatortest.NodeReq("n1"))
	recv(one)
	over := curatortest.Watch(t, conn, curatortest.NodesReq())
	if err := over.End(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third stream: %v", err)
	}

	st.Put(curatortest.Node("n1", commonpb.NodeState_NODE_STATE_DECOMMISSIONED, "10.0.0.1"))
	st.Del("n2")
	st.PutRaw("n4", "not a record")
	for _, w := range []*curatortest.Stream{all, all, one} {
		recv(w)
	}
	want := map[string]float64{
		`nodewatch_serve_get_nodes_calls_total`:                       1,
		`nodewatch_serve_streams_refused_total{reason="bad_request"}`: 1,
		`nodewatch_serve_streams_refused_total{reason="max_streams"}`: 1,
		`nodewatch_serve_watch_events_sent_total`:                     5, // 2 backlogs, 2 + 1 changes
		`nodewatch_serve_watch_sent_bytes_total`:                      float64(sent),
		`nodewatch_serve_etcd_records_undecodable_total`:              1,
		`nodewatch_serve_streams_open{method="Watch"}`:                2,
	}
	absolute := map[string]float64{
		`nodewatch_serve_nodes`:                             2,
		`nodewatch_serve_view_current`:                      1,
		`nodewatch_serve_backlog_streams`:                   0,
		`nodewatch_serve_backlog_nodes`:                     0,
		`nodewatch_serve_etcd_revision`:                     rev(),
		`nodewatch_serve_etcd_last_event_timestamp_seconds`: before[`nodewatch_serve_etcd_last_event_timestamp_seconds`],
	}
	var after scrape
	testkit.Eventually(t, func() error {
		after = scrapeMetrics(t, hs.URL)
		// The last event's time is new; only that it moved is known.
		if k := `nodewatch_serve_etcd_last_event_timestamp_seconds`; after[k] > before[k] {
			absolute[k] = after[k]
		}
		if d := moved(before, after, want, absolute); d != "" {
			return fmt.Errorf("%s", d)
		}
		return nil
	})
	for _, k := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := after[k]; ok {
			t.Errorf("%s is in the Server's registry: the runtime and process collectors are the process's (internal/service)", k)
		}
	}
}
