//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// twoOfThreeUp serves a fleet of three nodes, two up and the third
// (idC) NEW, and returns serve's address and a client of its etcd.
func twoOfThreeUp(t *testing.T) (string, *clientv3.Client) {
	t.Helper()
	ep, c := fleet(t,
		node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"),
		node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"),
		node(idC, commonpb.NodeState_NODE_STATE_NEW, "10.0.0.3"),
	)
	addr, _ := serve(t, ep)
	return addr, c
}

// TestWaitReportJSON: a CI wait for three nodes up where two come up
// ends with 124, and --report holds, as JSON, which node held it up.
func TestWaitReportJSON(t *testing.T) {
	t.Parallel()
	addr, _ := twoOfThreeUp(t)
	file := filepath.Join(t.TempDir(), "report.json")
	_, stderr, code := runSync(t, "nodes", "--curator", addr, "--each", `.state == "NODE_STATE_UP"`, "--at-least", "3", "--timeout", "3s", "--report", file)
	if code != exitTimeout {
		t.Fatalf("exit %d, want %d: %s", code, exitTimeout, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type unmet struct{ ID, Summary string }
	var got struct {
		Stop, Goal       string
		Met              bool
		Objects, Meeting int
		Unmet            []unmet
		MoreUnmet        int `json:"more_unmet"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("--report is not JSON: %v\n%s", err, b)
	}
	want := got
	want.Stop, want.Goal, want.Objects, want.Meeting = "timed out", `--each '.state == "NODE_STATE_UP"' --at-least 3`, 3, 2
	want.Unmet, want.MoreUnmet = []unmet{{"metropolis-" + idC, "NEW 10.0.0.3"}}, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--report (-want +got):\n%s", diff)
	}

	// Met, the report is written too (over the stale one), and says so.
	_, stderr, code = runSync(t, "nodes", "--curator", addr, "--each", `.state == "NODE_STATE_UP"`, "--at-least", "2", "--timeout", "30s", "--report", file)
	if code != 0 || stderr != "" {
		t.Fatalf("met: exit %d, stderr %q", code, stderr)
	}
	if b, err = os.ReadFile(file); err != nil {
		t.Fatal(err)
	}
	got = want
	got.Unmet, got.Stop, got.Met = nil, "", false
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("--report is not JSON: %v\n%s", err, b)
	}
	want.Stop, want.Met, want.Goal = "goal met", true, `--each '.state == "NODE_STATE_UP"' --at-least 2`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--report of a wait met (-want +got):\n%s", diff)
	}
}
