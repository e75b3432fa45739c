//go:build linux

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Recovery is how long one stream took to recover from one fault: from
// the moment of the fault (for a silent connection, the moment it went
// silent) to the first line the stream printed that reflects a write
// etcd acknowledged after the fault.
type Recovery struct {
	Kind Kind
	// Stream is the kind of stream: StreamKey, StreamNodes or
	// StreamEtcdctl.
	Stream string
	// Took is the time to recover; meaningful when Failed is "".
	Took time.Duration
	// Held is how long the fault lasted before it was undone (0 for a
	// fault that is not undone, such as a silent connection).
	Held time.Duration
	// Failed says why the stream did not recover ("" when it did): it
	// printed nothing newer within Config.Converge, or (etcdctl) it ended.
	Failed string
}

// The streams whose recovery is measured.
const (
	// StreamKey is the pinned `key --prefix` (the first line with a rev
	// after the fault's).
	StreamKey = "key"
	// StreamNodes is `nodes` through serve (the marker written to a node
	// record after the fault).
	StreamNodes = "nodes"
	// StreamEtcdctl is `etcdctl watch --prefix` (the first event with a
	// mod_revision after the fault's).
	StreamEtcdctl = "etcdctl"
)

// measurement times the recovery of the streams one fault concerns: it
// waits, from before the fault, for each stream to print the marker that
// is written once the fault is in place. Its methods are called by the
// run's goroutine.
type measurement struct {
	kind   Kind
	marker string
	t0     time.Time // the fault; zero until fault
	held   time.Duration
	waits  []streamWait
	cancel context.CancelFunc // stops the marker's writer
	wg     sync.WaitGroup     // the marker's writer
	write  func(context.Context)
}

type streamWait struct {
	stream string
	at     <-chan time.Time
	ctl    *Etcdctl // for StreamEtcdctl: ended is a failure
}

// measured returns which streams a fault of kind k concerns: key (the
// pinned `key --prefix`), nodes, and the etcdctl to compare with (nil:
// none).
func (r *run) measured(k Kind) (key, nodes bool, ctl *Etcdctl) {
	switch k {
	case LeaderKill, MemberPause, QuorumLoss:
		return true, true, r.ctlAll
	case WatchedMemberKill, SilentEtcdWatcher:
		return true, false, r.ctlPin
	case MemberPartition:
		return true, true, r.ctlPin
	case SilentServeEtcd, SilentNodesServe:
		return false, true, r.ctlPin
	case ServeRestart, ServeFailover:
		return false, true, nil
	}
	return false, false, nil // compaction-cut, reader-pause: not a recovery
}

// measureStart prepares the measurement of a fault of kind k (nil when
// its recovery is not measured): each stream waits for the marker.
func (r *run) measureStart(ctx context.Context, k Kind) *measurement {
	key, nodes, ctl := r.measured(k)
	if !key && !nodes {
		return nil
	}
	r.markers++
	m := &measurement{kind: k, marker: fmt.Sprintf("marker-%d-%d", r.cfg.Seed, r.markers)}
	value := fmt.Sprintf(`{"marker":%q}`, m.marker)
	if key {
		m.waits = append(m.waits, streamWait{stream: StreamKey, at: r.keyAll.WaitLine(Marker(m.marker))})
	}
	if nodes {
		m.waits = append(m.waits, streamWait{stream: StreamNodes, at: r.nodes.WaitLine(Marker(m.marker))})
	}
	if ctl != nil && r.etcdctlWatching(ctx, ctl) {
		m.waits = append(m.waits, streamWait{stream: StreamEtcdctl, at: ctl.WaitValue([]byte(value)), ctl: ctl})
	}
	m.write = r.markerWriter(m.marker, value)
	return m
}

// etcdctlWatching makes sure ctl watches before a fault: an etcdctl that
// ended (etcd cancelled its watch) is started again, and a value written
// to MarkerKey after that must come out of it (a new value every second:
// etcdctl watches from the revision it starts at), for up to
// cfg.Converge. It reports whether it does; if not, etcdctl is left out of
// this fault's measurement (logged).
func (r *run) etcdctlWatching(ctx context.Context, ctl *Etcdctl) bool {
	if ended, _ := ctl.Ended(); !ended {
		return true
	}
	n := 0
	var restart error
	err := testkit.Poll(ctx, r.cfg.Converge, func() (bool, error) {
		n++
		if restart = ctl.Restart(); restart != nil {
			return true, restart
		}
		probe := fmt.Sprintf(`{"etcdctl-probe":"%d-%d"}`, r.markers, n)
		at := ctl.WaitValue([]byte(probe))
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := r.client.Put(wctx, MarkerKey, probe)
		cancel()
		if err != nil {
			return false, err
		}
		select {
		case <-at:
			return true, nil
		case <-time.After(time.Second):
			return false, nil
		case <-ctx.Done():
			return true, ctx.Err()
		}
	})
	switch {
	case err == nil:
		return true
	case restart != nil:
		r.problem("%s: %v", ctl.Name, restart)
	case ctx.Err() == nil:
		r.t.Logf("  %s does not watch again within %v: left out of this fault's measurement", ctl.Name, r.cfg.Converge)
	}
	return false
}

// fault marks the moment of the fault and starts writing the marker (tried
// again until etcd acknowledges it).
func (m *measurement) fault() {
	if m == nil || !m.t0.IsZero() {
		return
	}
	m.t0 = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.write(ctx)
	}()
}

// undone marks the moment the fault was undone.
func (m *measurement) undone() {
	if m != nil && !m.t0.IsZero() {
		m.held = time.Since(m.t0)
	}
}

// measureEnd waits for every stream the fault concerns to print the
// marker, each for up to cfg.Converge, and records the recoveries; an
// etcdctl that ended is started again.
func (r *run) measureEnd(ctx context.Context, m *measurement) {
	if m == nil || m.t0.IsZero() {
		return
	}
	defer func() {
		m.cancel()
		m.wg.Wait()
	}()
	deadline := time.Now().Add(r.cfg.Converge)
	var got []string
	for _, w := range m.waits {
		rec := Recovery{Kind: m.kind, Stream: w.stream, Held: m.held}
		err := testkit.Poll(ctx, time.Until(deadline), func() (bool, error) {
			select {
			case at := <-w.at:
				rec.Took = at.Sub(m.t0)
				return true, nil
			default:
			}
			if w.ctl != nil {
				if ended, why := w.ctl.Ended(); ended {
					rec.Failed = "ended: " + why
					return true, nil
				}
			}
			return false, nil
		})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			rec.Failed = fmt.Sprintf("did not print the marker within %v", r.cfg.Converge)
			if w.stream == StreamKey {
				r.t.Logf("  %s's stderr:\n%s", r.keyAll.Name, clip(r.keyAll.Stderr()))
			}
		}
		r.report.Recoveries = append(r.report.Recoveries, rec)
		if rec.Failed != "" {
			got = append(got, fmt.Sprintf("%s %s", w.stream, rec.Failed))
		} else {
			got = append(got, fmt.Sprintf("%s %v", w.stream, rec.Took.Round(10*time.Millisecond)))
		}
	}
	r.t.Logf("  recovered (held %v): %s", m.held.Round(10*time.Millisecond), strings.Join(got, ", "))
}
