package sim_test

import (
	"context"
	"encoding/base64"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

var (
	idPattern   = regexp.MustCompile(`^metropolis-[0-9a-f]{32}$`)
	addrPattern = regexp.MustCompile(`^10\.\d{1,3}\.\d{1,3}\.\d{1,3}$`)
)

// ctxFor returns a context that ends with the test or after testkit.Timeout.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// populate returns a Sim for cfg whose initial fleet is in etcd.
func populate(t *testing.T, kv clientv3.KV, cfg sim.Config) *sim.Sim {
	t.Helper()
	s := sim.New(cfg)
	if err := s.Populate(ctxFor(t), kv); err != nil {
		t.Fatal(err)
	}
	return s
}

// steps makes n changes and returns them.
func steps(t *testing.T, s *sim.Sim, kv clientv3.KV, n int) []sim.Op {
	t.Helper()
	ctx := ctxFor(t)
	var ops []sim.Op
	for range n {
		op, err := s.Step(ctx, kv)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops
}

// write is an Op without what depends on where it was written (key prefix,
// etcd revision).
type write struct {
	Kind  sim.Kind
	Step  int64
	Time  time.Time
	ID    string
	Value string
}

func writes(ops []sim.Op) []write {
	var out []write
	for _, op := range ops {
		out = append(out, write{op.Kind, op.Step, op.Time, op.ID, string(op.Value)})
	}
	return out
}

// decode parses a record written in format f.
func decode(f sim.Format, value string) (*apipb.Node, error) {
	n := &apipb.Node{}
	if f == sim.Binary {
		return n, proto.Unmarshal([]byte(value), n)
	}
	return n, protojson.Unmarshal([]byte(value), n)
}

// TestSim runs the tests that need etcd against one embedded server; each
// uses its own prefix, so they run in parallel.
func TestSim(t *testing.T) {
	t.Parallel()
	c := etcdtest.Client(t, etcdtest.Start(t))
	tests := []struct {
		name string
		test func(*testing.T, *clientv3.Client)
	}{
		// The same seed writes the same records; another seed, others.
		{"Determinism", testDeterminism},
		// Every record is a valid Node under the key of its id.
		{"Records", testRecords},
		// Changes follow the lifecycle, and the fleet stays near its size.
		{"Lifecycle", testLifecycle},
		// A Step whose write fails leaves the Sim as it was: the sequence of
		// changes goes on as if the failure never happened.
		{"StepRetry", testStepRetry},
		// Run and RunSteps stop when they should.
		{"Run", testRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, c)
		})
	}
}

func testDeterminism(t *testing.T, c *clientv3.Client) {
	for _, f := range []sim.Format{sim.JSON, sim.Binary} {
		t.Run(f.String(), func(t *testing.T) {
			t.Parallel()
			run := func(prefix string, seed int64) ([]write, map[string]string) {
				s := populate(t, c, sim.Config{Nodes: 15, Seed: seed, Prefix: prefix, Format: f})
				ops := steps(t, s, c, 200)
				return writes(ops), etcdtest.Get(t, c, prefix)
			}
			opsA, recordsA := run("/"+f.String()+"/a/", 42)
			opsB, recordsB := run("/"+f.String()+"/b/", 42)
			opsC, recordsC := run("/"+f.String()+"/c/", 43)
			if diff := cmp.Diff(opsA, opsB); diff != "" {
				t.Errorf("same seed, different changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(recordsA, recordsB); diff != "" {
				t.Errorf("same seed, different records in etcd (-want +got):\n%s", diff)
			}
			if cmp.Equal(opsA, opsC) || cmp.Equal(recordsA, recordsC) {
				t.Errorf("seeds 42 and 43 made the same changes or records")
			}
		})
	}
}

func testRecords(t *testing.T, c *clientv3.Client) {
	for _, f := range []sim.Format{sim.JSON, sim.Binary} {
		t.Run(f.String(), func(t *testing.T) {
			t.Parallel()
			prefix := "/records/" + f.String() + "/"
			s := populate(t, c, sim.Config{Nodes: 20, Seed: 7, Prefix: prefix, Format: f})
			for _, op := range steps(t, s, c, 300) {
				if op.Key != prefix+op.ID {
					t.Errorf("step %d: key %q for id %q", op.Step, op.Key, op.ID)
				}
				if op.Kind == sim.Delete {
					if op.Node != nil || op.Value != nil {
						t.Errorf("step %d: delete carries a record", op.Step)
					}
					continue
				}
				n, err := decode(f, string(op.Value))
				if err != nil {
					t.Fatalf("step %d: %v", op.Step, err)
				}
				if !proto.Equal(n, op.Node) {
					t.Errorf("step %d: value %s does not hold Op.Node %v", op.Step, op.Value, op.Node)
				}
			}
			records := etcdtest.Get(t, c, prefix)
			if len(records) == 0 {
				t.Fatal("no records")
			}
			for id, value := range records {
				checkRecord(t, f, id, value, s.Now())
			}
		})
	}
}

// checkRecord checks the record of node id as read from etcd.
func checkRecord(t *testing.T, f sim.Format, id, value string, now time.Time) {
	t.Helper()
	if !idPattern.MatchString(id) {
		t.Errorf("id %q does not match %v", id, idPattern)
	}
	n, err := decode(f, value)
	if err != nil {
		t.Errorf("%s: %v", id, err)
		return
	}
	if n.Id != id {
		t.Errorf("record under %q has id %q", id, n.Id)
	}
	if f == sim.JSON && n.Status != nil && !strings.Contains(value, `"external_address":`) {
		t.Errorf("%s: not in proto field names: %s", id, value)
	}
	if len(n.GetLabels().GetPairs()) < 2 {
		t.Errorf("%s: labels %v", id, n.GetLabels())
	}
	if n.State != commonpb.NodeState_NODE_STATE_UP {
		return
	}
	st, roles := n.GetStatus(), n.GetRoles()
	if !addrPattern.MatchString(st.GetExternalAddress()) {
		t.Errorf("%s: external_address %q", id, st.GetExternalAddress())
	}
	if ts := st.GetTimestamp().AsTime(); ts.Before(sim.Epoch()) || ts.After(now) {
		t.Errorf("%s: timestamp %v outside [%v, %v]", id, ts, sim.Epoch(), now)
	}
	if len(st.GetBootId()) != 16 || st.GetVersion().GetRelease() == nil {
		t.Errorf("%s: boot_id %x, version %v", id, st.GetBootId(), st.GetVersion())
	}
	if key, err := base64.StdEncoding.DecodeString(n.GetClusternet().GetWireguardPubkey()); err != nil || len(key) != 32 {
		t.Errorf("%s: wireguard_pubkey %q: %d bytes, %v", id, n.GetClusternet().GetWireguardPubkey(), len(key), err)
	}
	if p := n.GetClusternet().GetPrefixes(); len(p) != 2 || p[0].Cidr != st.GetExternalAddress()+"/32" {
		t.Errorf("%s: prefixes %v for address %s", id, p, st.GetExternalAddress())
	}
	control := roles.GetConsensusMember() != nil
	switch {
	case control && (roles.GetKubernetesController() == nil || roles.GetKubernetesWorker() != nil || st.GetRunningCurator().GetPort() != curator.DefaultPort):
		t.Errorf("%s: control-plane node with roles %v, status %v", id, roles, st)
	case !control && (roles.GetKubernetesWorker() == nil || roles.GetKubernetesController() != nil || st.GetRunningCurator() != nil):
		t.Errorf("%s: worker with roles %v, status %v", id, roles, st)
	}
}

func testLifecycle(t *testing.T, c *clientv3.Client) {
	const (
		NEW     = commonpb.NodeState_NODE_STATE_NEW
		STANDBY = commonpb.NodeState_NODE_STATE_STANDBY
		UP      = commonpb.NodeState_NODE_STATE_UP
		DECOM   = commonpb.NodeState_NODE_STATE_DECOMMISSIONED
		GONE    = commonpb.NodeState_NODE_STATE_INVALID
	)
	// Each kind of change moves a node from one state to another.
	transitions := map[sim.Kind][2]commonpb.NodeState{
		sim.Join:         {GONE, NEW},
		sim.Standby:      {NEW, STANDBY},
		sim.Up:           {STANDBY, UP},
		sim.Status:       {UP, UP},
		sim.Labels:       {UP, UP},
		sim.Decommission: {UP, DECOM},
		sim.Delete:       {DECOM, GONE},
	}
	tests := []struct {
		name      string
		nodes     int
		seed      int64
		wantKinds []sim.Kind
	}{
		// One node is a control-plane node, which is never decommissioned.
		{"single", 1, 1, []sim.Kind{sim.Status, sim.Labels}},
		{"small", 5, 2, sim.Kinds()},
		{"fleet", 20, 3, sim.Kinds()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := "/lifecycle/" + tt.name + "/"
			s := populate(t, c, sim.Config{Nodes: tt.nodes, Seed: tt.seed, Prefix: prefix})
			slack := max(1, tt.nodes/10)
			state := map[string]commonpb.NodeState{}
			for id := range etcdtest.Get(t, c, prefix) {
				state[id] = UP
			}
			if len(state) != tt.nodes {
				t.Fatalf("Populate wrote %d nodes, want %d", len(state), tt.nodes)
			}
			kinds := map[sim.Kind]bool{}
			for i, op := range steps(t, s, c, 500) {
				kinds[op.Kind] = true
				if op.Step != int64(i+1) || !op.Time.Equal(sim.Epoch().Add(time.Duration(op.Step)*sim.StepInterval)) {
					t.Fatalf("change %d: step %d at %v", i+1, op.Step, op.Time)
				}
				want := transitions[op.Kind]
				got := [2]commonpb.NodeState{state[op.ID], op.Node.GetState()}
				if got != want {
					t.Fatalf("step %d: %v moved %s from %v to %v, want %v to %v", op.Step, op.Kind, op.ID, got[0], got[1], want[0], want[1])
				}
				if op.Kind == sim.Delete {
					delete(state, op.ID)
				} else {
					state[op.ID] = op.Node.State
				}
				live := 0
				for _, st := range state {
					if st != DECOM {
						live++
					}
				}
				if live < tt.nodes-slack || live > tt.nodes || len(state) > tt.nodes+slack {
					t.Fatalf("step %d: %d live nodes, %d records; want %d to %d live, at most %d records",
						op.Step, live, len(state), tt.nodes-slack, tt.nodes, tt.nodes+slack)
				}
			}
			var gotKinds []sim.Kind
			for _, k := range sim.Kinds() {
				if kinds[k] {
					gotKinds = append(gotKinds, k)
				}
			}
			if diff := cmp.Diff(tt.wantKinds, gotKinds); diff != "" {
				t.Errorf("kinds of change in 500 steps (-want +got):\n%s", diff)
			}

			// What the Ops said is what etcd holds, and what Stats counts.
			inEtcd := map[string]commonpb.NodeState{}
			for id, value := range etcdtest.Get(t, c, prefix) {
				n, err := decode(sim.JSON, value)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				inEtcd[id] = n.State
			}
			if diff := cmp.Diff(state, inEtcd); diff != "" {
				t.Errorf("etcd differs from the changes made (-want +got):\n%s", diff)
			}
			counts := map[commonpb.NodeState]int{}
			for _, st := range state {
				counts[st]++
			}
			if diff := cmp.Diff(counts, s.Stats().Records); diff != "" {
				t.Errorf("Stats().Records (-want +got):\n%s", diff)
			}
		})
	}
}

func testStepRetry(t *testing.T, c *clientv3.Client) {
	want := writes(steps(t, populate(t, c, sim.Config{Seed: 5, Prefix: "/want/"}), c, 40))

	s := populate(t, c, sim.Config{Seed: 5, Prefix: "/got/"})
	got := writes(steps(t, s, c, 20))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for range 3 {
		if _, err := s.Step(cancelled, c); !errors.Is(err, context.Canceled) {
			t.Fatalf("Step with a cancelled context: got %v, want context.Canceled", err)
		}
	}
	got = append(got, writes(steps(t, s, c, 20))...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes around failed steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(etcdtest.Get(t, c, "/want/"), etcdtest.Get(t, c, "/got/")); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func testRun(t *testing.T, c *clientv3.Client) {
	tests := []struct {
		name     string
		ctx      func(t *testing.T) context.Context
		rate     float64
		duration time.Duration
		steps    int64
		wantErr  error
		// wantSteps is the number of changes made; -1: any.
		wantSteps int64
		// minTime is a lower bound on how long the run takes.
		minTime time.Duration
	}{
		{name: "steps, unpaced", ctx: ctxFor, steps: 50, wantSteps: 50},
		{name: "steps, paced", ctx: ctxFor, rate: 200, steps: 5, wantSteps: 5, minTime: 25 * time.Millisecond},
		{name: "duration before the first tick", ctx: ctxFor, rate: 0.001, duration: 20 * time.Millisecond, minTime: 20 * time.Millisecond},
		{name: "duration, unpaced", ctx: ctxFor, duration: 20 * time.Millisecond, wantSteps: -1, minTime: 20 * time.Millisecond},
		{
			name: "cancelled",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			wantErr: context.Canceled,
		},
		{
			name: "deadline while waiting for a tick",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			rate:    0.001,
			wantErr: context.DeadlineExceeded,
			minTime: 20 * time.Millisecond,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := populate(t, c, sim.Config{Nodes: 5, Seed: int64(i), Prefix: "/run/" + tt.name + "/"})
			start := time.Now()
			err := s.RunSteps(tt.ctx(t), c, tt.rate, tt.duration, tt.steps)
			took := time.Since(start)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Errorf("RunSteps: got %v, want %v", err, tt.wantErr)
			}
			if got := s.Stats().Steps; tt.wantSteps >= 0 && got != tt.wantSteps {
				t.Errorf("made %d changes, want %d", got, tt.wantSteps)
			}
			if took < tt.minTime {
				t.Errorf("took %v, want at least %v", took, tt.minTime)
			}
		})
	}
}

func TestStatsString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		stats sim.Stats
		want  string
	}{
		{"empty", sim.Stats{Time: sim.Epoch()}, "0 changes, 0 nodes at 2026-01-01T00:00:00Z"},
		{
			"busy",
			sim.Stats{
				Steps:   12,
				Time:    sim.Epoch().Add(12 * sim.StepInterval),
				Changes: map[sim.Kind]int64{sim.Status: 9, sim.Join: 1, sim.Standby: 1, sim.Decommission: 1},
				Records: map[commonpb.NodeState]int{commonpb.NodeState_NODE_STATE_UP: 9, commonpb.NodeState_NODE_STATE_STANDBY: 1, commonpb.NodeState_NODE_STATE_DECOMMISSIONED: 1},
			},
			"12 changes (1 join, 1 standby, 9 status, 1 decommission), 11 nodes (1 standby, 9 up, 1 decommissioned) at 2026-01-01T00:00:12Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.stats.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSteady: a Steady fleet holds Nodes records, all UP, whatever it
// changes; without Steady the same seed soon changes the fleet.
func TestSteady(t *testing.T) {
	t.Parallel()
	c := etcdtest.Client(t, etcdtest.Start(t))
	for _, steady := range []bool{true, false} {
		prefix := "/steady-" + strconv.FormatBool(steady) + "/"
		s := populate(t, c, sim.Config{Nodes: 5, Seed: 3, Prefix: prefix, Steady: steady})
		lifecycle := 0
		for _, op := range steps(t, s, c, 300) {
			if op.Kind != sim.Status && op.Kind != sim.Labels {
				lifecycle++
			}
		}
		records := etcdtest.Get(t, c, prefix)
		up := 0
		for _, v := range records {
			if strings.Contains(v, `"NODE_STATE_UP"`) {
				up++
			}
		}
		switch {
		case steady && (lifecycle != 0 || len(records) != 5 || up != 5):
			t.Errorf("steady: %d lifecycle changes in 300 steps, %d records, %d UP; want 0, 5, 5", lifecycle, len(records), up)
		case !steady && lifecycle == 0:
			t.Errorf("churning: no lifecycle change in 300 steps")
		}
	}
}
