package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// Metrics are what a Server tells Prometheus about itself. Their names
// and meanings are listed in docs/reference.md ("serve's metrics"); a test
// scrapes them around a known run. No label names a node or a peer, so
// the number of series does not grow with the fleet or its clients.
//
// A nil *Metrics counts nothing: every method is safe on nil.
type Metrics struct {
	streamsOpen    *prometheus.GaugeVec
	streamsRefused *prometheus.CounterVec
	eventsSent     prometheus.Counter
	bytesSent      prometheus.Counter
	updatesMerged  prometheus.Counter
	backlogStreams prometheus.Gauge
	backlogNodes   prometheus.Gauge
	nodes          prometheus.Gauge
	current        prometheus.Gauge
	etcdRevision   prometheus.Gauge
	etcdLastEvent  prometheus.Gauge
	etcdRestarts   *prometheus.CounterVec
	undecodable    prometheus.Counter
	getNodesCalls  prometheus.Counter
	connections    prometheus.Gauge
	connsRefused   prometheus.Counter
}

// Reasons a stream is refused, the values of the reason label of
// nodewatch_serve_streams_refused_total.
const (
	refusedLimit      = "max_streams" // --max-streams open already
	refusedNotCurrent = "not_current" // the view of etcd is not confirmed current
	refusedStopping   = "stopping"    // the server is draining or has stopped
	refusedBadRequest = "bad_request" // an invalid, undecodable or unsupported request
)

// Reasons the etcd watch starts again, the values of the reason label of
// nodewatch_serve_etcd_watch_restarts_total.
const (
	restartLost      = "lost"      // the stream failed or went silent; resumed at the next revision
	restartCompacted = "compacted" // the revision to resume at was compacted; listed again
)

// NewMetrics returns a Server's metrics, registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "nodewatch", "serve"
	f := func(o prometheus.Opts) prometheus.Opts { o.Namespace, o.Subsystem = ns, sub; return o }
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(f(prometheus.Opts{Name: name, Help: help})))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(f(prometheus.Opts{Name: name, Help: help})))
	}
	counterVec := func(name, label, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts(f(prometheus.Opts{Name: name, Help: help})), []string{label})
	}
	gaugeVec := func(name, label, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(f(prometheus.Opts{Name: name, Help: help})), []string{label})
	}
	m := &Metrics{
		streamsOpen: gaugeVec("streams_open", "method",
			"gRPC streams being served, by method (Watch, GetNodes, GetCurrentLeader, Health/Watch, …)."),
		streamsRefused: counterVec("streams_refused_total", "reason",
			"Streams refused, by reason: max_streams, not_current (etcd has not confirmed the view current), stopping (draining or stopped), bad_request (invalid, undecodable or unsupported)."),
		eventsSent:     counter("watch_events_sent_total", "WatchEvents sent on Watch streams, backlog included."),
		bytesSent:      counter("watch_sent_bytes_total", "Bytes of the WatchEvents sent on Watch streams (protobuf encoding, before gRPC framing)."),
		updatesMerged:  counter("watch_updates_merged_total", "Node changes that a slow Watch stream never sent because a later change of the same node replaced them."),
		backlogStreams: gauge("backlog_streams", "Watch streams still sending their initial backlog."),
		backlogNodes:   gauge("backlog_nodes", "Nodes in backlogs not yet sent, over all streams."),
		nodes:          gauge("nodes", "Nodes in the server's view of etcd."),
		current:        gauge("view_current", "1 while etcd confirms the view current and streams are served, else 0."),
		etcdRevision:   gauge("etcd_revision", "The etcd revision the view is at."),
		etcdLastEvent:  gauge("etcd_last_event_timestamp_seconds", "Unix time at which the last change from etcd was applied (its age: time() - this)."),
		etcdRestarts: counterVec("etcd_watch_restarts_total", "reason",
			"Times the etcd watch started again, by reason: lost (an error or a silent connection; resumed where it was) or compacted (listed again)."),
		undecodable:   counter("etcd_records_undecodable_total", "Node records from etcd that could not be decoded (each is logged and skipped)."),
		getNodesCalls: counter("get_nodes_calls_total", "Management.GetNodes calls."),
		connections:   gauge("connections_open", "Client connections open."),
		connsRefused:  counter("connections_refused_total", "Client connections closed as soon as accepted, because --max-connections were open."),
	}
	reg.MustRegister(m.streamsOpen, m.streamsRefused, m.eventsSent, m.bytesSent, m.updatesMerged,
		m.backlogStreams, m.backlogNodes, m.nodes, m.current, m.etcdRevision, m.etcdLastEvent,
		m.etcdRestarts, m.undecodable, m.getNodesCalls, m.connections, m.connsRefused)
	// Series that exist from the start, so that rate() and alerts see
	// them before the first increment.
	for _, r := range []string{refusedLimit, refusedNotCurrent, refusedStopping, refusedBadRequest} {
		m.streamsRefused.WithLabelValues(r)
	}
	for _, r := range []string{restartLost, restartCompacted} {
		m.etcdRestarts.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.streamsRefused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) sent(bytes int) {
	if m != nil {
		m.eventsSent.Inc()
		m.bytesSent.Add(float64(bytes))
	}
}

func (m *Metrics) merged(n int) {
	if m != nil {
		m.updatesMerged.Add(float64(n))
	}
}

// backlog counts a stream's backlog of n nodes as in flight (n > 0) or,
// with -n, as sent.
func (m *Metrics) backlog(streams, nodes int) {
	if m != nil {
		m.backlogStreams.Add(float64(streams))
		m.backlogNodes.Add(float64(nodes))
	}
}

// applied records a batch from etcd applied to the view.
func (m *Metrics) applied(rev int64, nodes int, changed bool) {
	if m != nil {
		m.etcdRevision.Set(float64(rev))
		m.nodes.Set(float64(nodes))
		if changed {
			m.etcdLastEvent.Set(float64(time.Now().UnixNano()) / 1e9)
		}
	}
}

func (m *Metrics) setCurrent(current bool) {
	if m != nil {
		v := 0.0
		if current {
			v = 1
		}
		m.current.Set(v)
	}
}

func (m *Metrics) restarted(reason string) {
	if m != nil {
		m.etcdRestarts.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) badRecord() {
	if m != nil {
		m.undecodable.Inc()
	}
}

func (m *Metrics) getNodes() {
	if m != nil {
		m.getNodesCalls.Inc()
	}
}

// connsOpen counts n connections opened (n > 0) or closed (n < 0).
func (m *Metrics) connsOpen(n int) {
	if m != nil {
		m.connections.Add(float64(n))
	}
}

func (m *Metrics) connRefused() {
	if m != nil {
		m.connsRefused.Inc()
	}
}

// intercept counts the streams open by method. It runs inside the limit
// on open streams (see Limits), so a stream refused there is counted by
// refused, not here.
func (m *Metrics) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	g := m.streamsOpen.WithLabelValues(methodName(info.FullMethod))
	g.Inc()
	defer g.Dec()
	return handler(srv, ss)
}

// methodName is the last element of a gRPC method's full name, with the
// service's last element before it when that is not the Curator's: Watch,
// GetNodes, GetCurrentLeader, Health/Watch.
func methodName(full string) string {
	svc, method := "", full
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			svc, method = full[:i], full[i+1:]
			break
		}
	}
	for i := len(svc) - 1; i >= 0; i-- {
		if svc[i] == '.' {
			svc = svc[i+1:]
			break
		}
	}
	switch svc {
	case "Curator", "CuratorLocal", "Management":
		return method
	}
	return svc + "/" + method
}
