//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// putNodeHealth writes the record of node id (UP at addr) with health
// members added, as a writer of records with health does.
func putNodeHealth(t *testing.T, c *clientv3.Client, id, addr, members string) {
	t.Helper()
	b, err := curator.EncodeRecord(node(id, commonpb.NodeState_NODE_STATE_UP, addr))
	if err != nil {
		t.Fatal(err)
	}
	rec := strings.TrimSuffix(string(b), "}") + "," + members + "}"
	etcdtest.Put(t, c, curator.DefaultPrefix+"metropolis-"+id, rec)
}

// healthEvent is one NDJSON line of a node stream, as far as health goes.
type healthEvent struct {
	Type    string
	ID      string
	Changed [][]string
	Object  struct {
		Health             string
		TimeSinceHeartbeat *string `json:"time_since_heartbeat"`
		Status             struct {
			ExternalAddress string `json:"external_address"`
		}
	}
}

// TestNodesHealth: `nodes --health` against serve gives every node the
// health its record holds (HEALTH_UNKNOWN when none) and, from a
// heartbeat, time_since_heartbeat; a record whose health changes prints
// updated, with changed naming health; --until over health ends the run
// once the condition holds, and not before.
func TestNodesHealth(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	beat := time.Now().Add(-2 * time.Second).UTC().Format(time.RFC3339Nano)
	putNodeHealth(t, c, idA, "10.0.0.1", `"health":"HEALTHY","heartbeat":"`+beat+`"`)
	putNodeHealth(t, c, idB, "10.0.0.2", `"health":"HEARTBEAT_TIMEOUT"`)
	putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_NEW, ""))
	addr, _ := serve(t, ep)

	until := start(t, "nodes", "--curator", addr, "--health", "--health-interval", "20ms",
		"--until", `all(.health == "HEALTH_HEALTHY" or .state != "NODE_STATE_UP")`, "--timeout", "1m")
	p := start(t, "nodes", "--curator", addr, "--health", "--health-interval", "20ms")
	initial := p.batch(t)
	if len(initial) != 4 {
		t.Fatalf("initial batch: %q, want 3 nodes", initial)
	}
	a, b, cc := parseLine[healthEvent](t, initial[0]), parseLine[healthEvent](t, initial[1]), parseLine[healthEvent](t, initial[2])
	if a.Object.Health != "HEALTH_HEALTHY" || a.Object.TimeSinceHeartbeat == nil {
		t.Errorf("node A: %s, want HEALTH_HEALTHY with a time_since_heartbeat", initial[0])
	} else if d, err := time.ParseDuration(*a.Object.TimeSinceHeartbeat); err != nil || d < 2*time.Second {
		t.Errorf("node A: time_since_heartbeat %q, want 2s or more", *a.Object.TimeSinceHeartbeat)
	}
	if b.Object.Health != "HEALTH_HEARTBEAT_TIMEOUT" || b.Object.TimeSinceHeartbeat != nil {
		t.Errorf("node B: %s, want HEALTH_HEARTBEAT_TIMEOUT and no time_since_heartbeat", initial[1])
	}
	if cc.Object.Health != "HEALTH_UNKNOWN" {
		t.Errorf("node C: %s, want HEALTH_UNKNOWN (its record has no health)", initial[2])
	}
	// The --until run has its initial state too (B times out): it runs on.
	until.batch(t)

	// B's health alone changes. A's time_since_heartbeat changes at every
	// poll and prints nothing: the next batch is B's update.
	putNodeHealth(t, c, idB, "10.0.0.2", `"health":"HEALTHY"`)
	got := p.batch(t)
	if len(got) != 2 {
		t.Fatalf("after B's health changed: %q, want one updated", got)
	}
	ev := parseLine[healthEvent](t, got[0])
	if ev.Type != "updated" || ev.ID != "metropolis-"+idB || ev.Object.Health != "HEALTH_HEALTHY" {
		t.Errorf("after B's health changed: %s, want B updated to HEALTH_HEALTHY", got[0])
	}
	if len(ev.Changed) != 1 || len(ev.Changed[0]) != 1 || ev.Changed[0][0] != "health" {
		t.Errorf("changed %v, want [[health]]", ev.Changed)
	}
	// It ran on until B's update, which it prints before it ends.
	if last := until.batch(t); !strings.Contains(last[0], `"type":"updated"`) || !strings.Contains(last[0], idB) {
		t.Errorf("--until run's last batch: %q, want B's update", last)
	}
	if code := until.wait(t); code != 0 {
		t.Errorf("--until over health: exit %d, want 0; stderr:\n%s", code, until.stderr)
	}

	// A node change keeps its health.
	putNodeHealth(t, c, idB, "10.0.0.9", `"health":"HEALTHY"`)
	ev = parseLine[healthEvent](t, p.batch(t)[0])
	if ev.Object.Status.ExternalAddress != "10.0.0.9" || ev.Object.Health != "HEALTH_HEALTHY" {
		t.Errorf("after B moved: %+v, want 10.0.0.9 and HEALTH_HEALTHY", ev.Object)
	}
}

// TestNodesHealthNoManagement: --health against a Curator that does not
// serve Management.GetNodes fails at once, saying so; without --health
// the same server works.
func TestNodesHealthNoManagement(t *testing.T) {
	t.Parallel()
	addr := startSlowCurator(t, 1, time.Millisecond)
	_, stderr, code := runSync(t, "nodes", "--curator", addr, "--health", "--once")
	if code != exitFailure || !strings.Contains(stderr, "Management.GetNodes") || !strings.Contains(stderr, "Unimplemented") {
		t.Errorf("--health without Management: exit %d, stderr %q; want 1 and a message naming Management.GetNodes", code, stderr)
	}
	if stdout, stderr, code := runSync(t, "nodes", "--curator", addr, "--once"); code != 0 || !strings.Contains(stdout, "batch_done") {
		t.Errorf("without --health: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
