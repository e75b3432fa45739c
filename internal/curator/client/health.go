package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// health is what a node's object gets from Management.GetNodes.
type health struct {
	health mgmtpb.Node_Health
	since  *durationpb.Duration // time_since_heartbeat; nil when not given
}

// unknown is the health of a node GetNodes has not reported (yet).
var unknown = health{health: mgmtpb.Node_HEALTH_UNKNOWN}

// runWithHealth is Run with HealthInterval set: the Watch stream, with
// each node's object given the health Management.GetNodes reports,
// polled every HealthInterval on a connection of its own (see Client).
func (c *Client) runWithHealth(ctx context.Context, out flow.Sink) error {
	ctx, cancel := context.WithCancelCause(ctx)
	m := &merger{out: out, nodes: map[string]*jsondoc.Doc{}, shown: map[string]health{}}
	var wg sync.WaitGroup
	// Deferred calls run last first: the poller is told to stop, then
	// waited for, so that it never outlives Run (nor puts into out after).
	defer wg.Wait()
	defer cancel(nil)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cancel(c.pollHealth(ctx, m))
	}()
	err := c.run(ctx, m)
	if cause := context.Cause(ctx); ctx.Err() != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause // the poller's: GetNodes refused, or never answered
	}
	return err
}

// pollHealth calls GetNodes every HealthInterval and hands the health it
// reports to m, until ctx ends (nil) or GetNodes fails for good before
// its first answer: refused with a status retrying cannot change (a
// server without Management, a certificate without the permission), or
// not answered within DialTimeout of the start (ErrUnavailable). Once it
// has answered, every failure (a refusal too: a certificate being
// rotated, a leader changing) is logged and retried, and the nodes keep
// their last health.
func (c *Client) pollHealth(ctx context.Context, m *merger) error {
	deadline := time.Now().Add(c.dialTimeout())
	bo := backoff.Backoff{Max: c.HealthInterval}
	var (
		conn   *grpc.ClientConn
		target string
		i      int
		ok     bool // GetNodes has answered
		failed bool // the last call failed (logged once until one works)
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		if conn == nil {
			target = c.Endpoints[i%len(c.Endpoints)]
			var err error
			if conn, err = c.dial(target); err != nil {
				return &fatalError{fmt.Errorf("health: bad endpoint %q: %w", target, err)}
			}
		}
		nodes, err := getNodes(ctx, conn, c.dialTimeout())
		if ctx.Err() != nil {
			return nil
		}
		wait := c.HealthInterval
		switch {
		case err == nil:
			m.health(nodes)
			ok, failed = true, false
			bo.Reset()
		case !ok && (isFatal(status.Code(err)) || status.Code(err) == codes.Unimplemented):
			// Refused before it ever answered: a server without
			// Management, or credentials without the permission.
			return &fatalError{fmt.Errorf("health: curator %s: Management.GetNodes: %w", target, err)}
		case !ok && !time.Now().Before(deadline):
			return fmt.Errorf("%w: no node health from curator at %s within %v (last error: %s: %v)",
				ErrUnavailable, c.endpoints(), c.dialTimeout(), target, err)
		default:
			if !failed && ok {
				c.Logf.Printf("health: curator %s: Management.GetNodes: %v; nodes keep their last health, retrying", target, err)
			}
			failed = true
			conn.Close()
			conn, i = nil, i+1
			if !ok {
				wait = min(bo.Next(), time.Until(deadline))
			}
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return nil
		}
	}
}

// getNodes calls GetNodes on conn and returns the health it reports, by
// node id. The call may take timeout.
func getNodes(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (map[string]health, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := mgmtpb.NewManagementClient(conn).GetNodes(ctx, &mgmtpb.GetNodesRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]health{}
	for {
		n, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if n.GetId() != "" {
			out[n.GetId()] = health{health: n.GetHealth(), since: n.GetTimeSinceHeartbeat()}
		}
	}
}

// merger sits between the Watch stream and the Client's sink and adds
// health to every node it passes on. The first full batch waits for the
// first poll, so that the initial state already has health; a poll that
// changes a node's health passes the node on again (updated). A node's
// time_since_heartbeat alone changing passes nothing on: it changes with
// every poll. The object of a node carries the time_since_heartbeat of
// the poll its health was last taken from: when it was last passed on as
// a change, or its health changed.
//
// Put is called by the Watch stream's goroutine, health by the poller's;
// mu orders them, and what they pass on.
type merger struct {
	out flow.Sink

	mu      sync.Mutex              // guards the fields below
	nodes   map[string]*jsondoc.Doc // the Watch stream's current nodes
	polled  map[string]health       // the last poll's answer; nil before the first
	shown   map[string]health       // the health in each node's object as passed on
	holding bool                    // a full batch waits for the first poll
	held    flow.Cause              // the Cause of that batch
}

// Put takes a batch of the Watch stream.
func (m *merger) Put(b flow.Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.Full() {
		m.nodes = make(map[string]*jsondoc.Doc, len(b.Changes))
		for _, c := range b.Changes {
			if !c.Deleted {
				m.nodes[c.ID] = c.Object.(*jsondoc.Doc)
			}
		}
		if m.polled == nil {
			if !m.holding {
				m.holding, m.held = true, b.Cause
			}
			return
		}
		m.putFull(b.Cause)
		return
	}
	if m.polled == nil && !m.holding {
		// (A source starts with a full batch; this is for one that does not.)
		m.holding, m.held = true, flow.CauseInitial
	}
	out := make([]flow.Change, 0, len(b.Changes))
	for _, c := range b.Changes {
		if c.Deleted {
			delete(m.nodes, c.ID)
			delete(m.shown, c.ID)
			out = append(out, c)
			continue
		}
		obj := c.Object.(*jsondoc.Doc)
		m.nodes[c.ID] = obj
		if m.holding {
			continue
		}
		h := m.latest(c.ID)
		m.shown[c.ID] = h
		out = append(out, flow.Change{ID: c.ID, Object: withHealth(obj, h)})
	}
	if !m.holding {
		m.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: b.Synced, Changes: out})
	}
}

// health takes a poll's answer.
func (m *merger) health(polled map[string]health) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polled = polled
	if m.holding {
		m.holding = false
		m.putFull(m.held)
		return
	}
	var out []flow.Change
	for id, obj := range m.nodes {
		if h := m.latest(id); h.health != m.shown[id].health {
			m.shown[id] = h
			out = append(out, flow.Change{ID: id, Object: withHealth(obj, h)})
		}
	}
	if len(out) > 0 {
		m.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: out})
	}
}

// putFull passes the current nodes on as a full batch. A node whose health
// is what its object showed keeps that object's time_since_heartbeat, so
// that a resync shows no change where there was none.
func (m *merger) putFull(cause flow.Cause) {
	b := flow.Batch{Cause: cause, Synced: true, Changes: make([]flow.Change, 0, len(m.nodes))}
	for id, obj := range m.nodes {
		h, ok := m.shown[id]
		if latest := m.latest(id); !ok || latest.health != h.health {
			h = latest
			m.shown[id] = h
		}
		b.Changes = append(b.Changes, flow.Change{ID: id, Object: withHealth(obj, h)})
	}
	for id := range m.shown {
		if _, ok := m.nodes[id]; !ok {
			delete(m.shown, id)
		}
	}
	m.out.Put(b)
}

// latest is the health the last poll reported for id.
func (m *merger) latest(id string) health {
	if h, ok := m.polled[id]; ok {
		return h
	}
	return unknown
}

// withHealth returns obj (a JSON object) with "health" and, when known,
// "time_since_heartbeat" (protobuf JSON: "1.5s") added as its last
// members.
func withHealth(obj *jsondoc.Doc, h health) *jsondoc.Doc {
	j := obj.JSON()
	b := make([]byte, 0, len(j)+64)
	b = append(b, j[:len(j)-1]...) // without its closing brace
	if len(j) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"health":"`...)
	b = append(b, h.health.String()...)
	b = append(b, '"')
	if h.since != nil {
		if d, err := protojson.Marshal(h.since); err == nil {
			b = append(b, `,"time_since_heartbeat":`...)
			b = append(b, d...)
		}
	}
	return jsondoc.New(append(b, '}'))
}
