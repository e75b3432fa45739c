package client

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/view"
)

// recorder is a Sink that keeps the batches put into it.
type recorder struct{ batches []flow.Batch }

func (r *recorder) Put(b flow.Batch) { r.batches = append(r.batches, b) }

// TestMergerModel drives the merger with random Watch batches (full and
// changes) and random polls, and checks what it passes on against a
// simple model: nothing before the first poll; after it, the view a
// reader builds from the batches holds exactly the Watch stream's nodes,
// each with its own members unchanged and the health of the last poll
// (HEALTH_UNKNOWN for a node the poll did not report); time_since_heartbeat
// is one the poll reported for the node, or absent; a poll that changes
// no node's health passes nothing on.
func TestMergerModel(t *testing.T) {
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		out := &recorder{}
		m := &merger{out: out, nodes: map[string]*jsondoc.Doc{}, shown: map[string]health{}}
		nodes := map[string]string{}                  // the model: the Watch stream's nodes
		var polled map[string]health                  // the last poll; nil before the first
		sinces := map[string]map[time.Duration]bool{} // every time_since_heartbeat polled, per id
		view := view.NewFollower(nil, nil)            // what a reader of out sees
		read := 0                                     // batches of out applied to view

		ids := []string{"a", "b", "c", "d", "e"}
		obj := func(id string) string { return fmt.Sprintf(`{"id":%q,"n":%d}`, id, rng.IntN(3)) }
		for step := range 40 {
			var desc string
			switch op := rng.IntN(10); {
			case op < 2: // a full batch
				b := flow.Batch{Cause: flow.CauseResync, Synced: true}
				nodes = map[string]string{}
				for _, id := range ids {
					if rng.IntN(2) == 0 {
						nodes[id] = obj(id)
						b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(nodes[id]))})
					}
				}
				desc = fmt.Sprintf("full %v", nodes)
				m.Put(b)
			case op < 6: // a change batch
				b := flow.Batch{Cause: flow.CauseChange, Synced: true}
				for range 1 + rng.IntN(2) {
					id := ids[rng.IntN(len(ids))]
					if _, ok := nodes[id]; ok && rng.IntN(3) == 0 {
						delete(nodes, id)
						b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true})
						continue
					}
					nodes[id] = obj(id)
					b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(nodes[id]))})
				}
				desc = fmt.Sprintf("change %v", b.Changes)
				m.Put(b)
			default: // a poll
				polled = map[string]health{}
				for _, id := range ids {
					if rng.IntN(4) == 0 {
						continue // not reported
					}
					h := health{health: mgmtpb.Node_Health(1 + rng.IntN(3))}
					if rng.IntN(2) == 0 {
						h.since = durationpb.New(time.Duration(rng.IntN(1e9)))
						if sinces[id] == nil {
							sinces[id] = map[time.Duration]bool{}
						}
						sinces[id][h.since.AsDuration()] = true
					}
					polled[id] = h
				}
				desc = fmt.Sprintf("poll %v", polled)
				before := len(out.batches)
				wasHolding := m.holding
				m.health(polled)
				changed := false
				for id := range nodes {
					if v, ok := view.Set().Get(id); ok && healthOf(t, v.(*jsondoc.Doc)) != want(polled, id).String() {
						changed = true
					}
				}
				if !wasHolding && !changed && len(out.batches) != before {
					t.Fatalf("seed %d step %d: a poll that changed no health passed on %v", seed, step, out.batches[before:])
				}
			}
			for ; read < len(out.batches); read++ {
				if err := view.Apply(out.batches[read], func(flow.Event) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if polled == nil {
				if len(out.batches) > 0 {
					t.Fatalf("seed %d step %d: passed on %v before the first poll", seed, step, out.batches)
				}
				continue
			}
			if n := view.Set().Len(); n != len(nodes) {
				t.Fatalf("seed %d step %d (%s): view has %d nodes, the stream %d", seed, step, desc, n, len(nodes))
			}
			for id, raw := range nodes {
				obj, ok := view.Set().Get(id)
				if !ok {
					t.Fatalf("seed %d step %d (%s): %s missing from the view", seed, step, desc, id)
				}
				v := obj.(*jsondoc.Doc)
				var got map[string]any
				if err := json.Unmarshal(v.JSON(), &got); err != nil {
					t.Fatalf("seed %d: %s: %v", seed, v.JSON(), err)
				}
				if got["health"] != want(polled, id).String() {
					t.Fatalf("seed %d step %d (%s): %s health %v, want %v", seed, step, desc, id, got["health"], want(polled, id))
				}
				if s, ok := got["time_since_heartbeat"].(string); ok {
					if d, err := time.ParseDuration(s); err != nil || !sinces[id][d] {
						t.Fatalf("seed %d step %d: %s time_since_heartbeat %q was never polled (%v)", seed, step, id, s, sinces[id])
					}
				}
				delete(got, "health")
				delete(got, "time_since_heartbeat")
				var orig map[string]any
				json.Unmarshal([]byte(raw), &orig)
				if fmt.Sprint(got) != fmt.Sprint(orig) {
					t.Fatalf("seed %d step %d (%s): %s is %v, want %v", seed, step, desc, id, got, orig)
				}
			}
		}
	}
}

func want(polled map[string]health, id string) mgmtpb.Node_Health {
	if h, ok := polled[id]; ok {
		return h.health
	}
	return mgmtpb.Node_HEALTH_UNKNOWN
}

func healthOf(t *testing.T, d *jsondoc.Doc) string {
	var v struct{ Health string }
	if err := json.Unmarshal(d.JSON(), &v); err != nil {
		t.Fatal(err)
	}
	return v.Health
}

func TestWithHealth(t *testing.T) {
	for _, tc := range []struct {
		obj  string
		h    health
		want string
	}{
		{`{"id":"a"}`, unknown, `{"id":"a","health":"HEALTH_UNKNOWN"}`},
		{`{}`, health{health: mgmtpb.Node_HEALTH_HEALTHY}, `{"health":"HEALTH_HEALTHY"}`},
		{`{"id":"a"}`, health{health: mgmtpb.Node_HEALTH_HEARTBEAT_TIMEOUT, since: durationpb.New(1500 * time.Millisecond)},
			`{"id":"a","health":"HEALTH_HEARTBEAT_TIMEOUT","time_since_heartbeat":"1.500s"}`},
	} {
		if got := string(withHealth(jsondoc.New([]byte(tc.obj)), tc.h).JSON()); got != tc.want {
			t.Errorf("withHealth(%s) = %s, want %s", tc.obj, got, tc.want)
		}
	}
}

// TestRunWithHealthRefused: when the Watch stream is refused for good
// while GetNodes answers, Run returns the refusal (it used to wait for
// the poller, which never stopped).
func TestRunWithHealthRefused(t *testing.T) {
	t.Parallel()
	c := serveNodes(t).client()
	c.NodeID = "a/b" // InvalidArgument
	c.HealthInterval = 50 * time.Millisecond
	if err := startClient(t, c).wait(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Run = %v, want InvalidArgument", err)
	}
}
