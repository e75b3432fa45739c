//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// waitExit waits for cmd, started, to end, and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestE2EFailIfDecommissioned: the CI wait of the issue. Three nodes,
// two up; the binary waits for all of them with --fail-if on
// DECOMMISSIONED and a long --timeout. The third is decommissioned: the
// run ends at once with 4, its report (stderr and --report) names it.
func TestE2EFailIfDecommissioned(t *testing.T) {
	t.Parallel()
	addr, c := twoOfThreeUp(t)
	file := filepath.Join(t.TempDir(), "report.json")
	cmd := command(t, "nodes", "--curator", addr, "--each", `.state == "NODE_STATE_UP"`,
		"--fail-if", `.state == "NODE_STATE_DECOMMISSIONED"`, "--timeout", "10m", "--report", file)
	lines, stderr := startLines(t, cmd)
	for range 4 { // the initial batch
		<-lines
	}
	putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_DECOMMISSIONED, "10.0.0.3"))
	put := time.Now()
	for range lines {
	}
	code := waitExit(t, cmd)
	took := time.Since(put)
	if code != exitFailIf {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailIf, stderr)
	}
	if took > time.Minute { // "at once": far from --timeout, whatever the load
		t.Errorf("ended %v after the node was decommissioned", took)
	}
	want := "nodewatch: report: met --fail-if: metropolis-" + idC + "  DECOMMISSIONED 10.0.0.3\n"
	if !strings.Contains(stderr.String(), want) || !strings.HasSuffix(stderr.String(), "nodewatch: --fail-if was met by metropolis-"+idC+"\n") {
		t.Errorf("stderr does not name the node:\n%s", stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type object struct{ ID, Summary string }
	var got struct {
		Stop, Goal       string
		Objects, Meeting int
		Tripped, Unmet   []object
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("--report: %v\n%s", err, b)
	}
	c3 := object{"metropolis-" + idC, "DECOMMISSIONED 10.0.0.3"}
	wantReport := got
	wantReport.Stop, wantReport.Goal, wantReport.Objects, wantReport.Meeting = "failure condition met", `--each '.state == "NODE_STATE_UP"' --fail-if '.state == "NODE_STATE_DECOMMISSIONED"'`, 3, 2
	wantReport.Tripped, wantReport.Unmet = []object{c3}, []object{c3}
	if diff := cmp.Diff(wantReport, got); diff != "" {
		t.Errorf("--report (-want +got):\n%s", diff)
	}
}

// TestE2EStableMetBrokenMetAgain: a goal that is met, broken and met
// again ends 0 only --stable after the last time it was met, and a
// timeout before then reports how long it held.
func TestE2EStableMetBrokenMetAgain(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	etcdtest.Put(t, c, "/st/a", "1")
	etcdtest.Put(t, c, "/st/b", "2")
	const stable = 3 * time.Second
	cmd := command(t, "key", "/st/", "--prefix", "--etcd", ep, "--until", "length >= 2", "--stable", stable.String(), "--timeout", "10m")
	lines, stderr := startLines(t, cmd)
	for range 3 { // the initial batch: met
		<-lines
	}
	etcdtest.Delete(t, c, "/st/b") // broken before it held
	for range 2 {
		<-lines
	}
	etcdtest.Put(t, c, "/st/b", "3")
	metAgain := time.Now()
	for range lines {
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if took := time.Since(metAgain); took < stable {
		t.Errorf("ended %v after the goal was met again, want at least --stable %v", took, stable)
	}

	// Never held long enough: the timeout reports how long it last held.
	_, stderrText, code := runSync(t, "key", "/st/", "--prefix", "--etcd", ep, "--until", "length >= 2", "--stable", "10m", "--timeout", "2s")
	if code != exitTimeout || !strings.Contains(stderrText, "report: the goal holds, for ") || !strings.Contains(stderrText, "timed out before --until was met for 10m0s (--stable)") {
		t.Errorf("exit %d, stderr:\n%s", code, stderrText)
	}
}

// TestE2ESettle: with --settle MIN:MAX, a burst of changes is delivered
// to the handler once, after MIN of quiet; a stream that never goes
// quiet for MIN is still delivered every MAX.
func TestE2ESettle(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	etcdtest.Put(t, c, "/se/seed", "1")
	log := filepath.Join(t.TempDir(), "deliveries")
	cmd := command(t, "key", "/se/", "--prefix", "--etcd", ep, "--settle", "2s:4s",
		"--exec", `echo "$NODEWATCH_BATCH $NODEWATCH_NEW $NODEWATCH_UPDATED" >> "$LOG"`)
	cmd.Env = append(cmd.Env, "LOG="+log)
	_, stderr := startLines(t, cmd)
	deliveries := func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(strings.ReplaceAll(string(b), " ", "/"))
	}
	testkit.Eventually(t, func() error { // the initial state
		if len(deliveries()) != 1 {
			return fmt.Errorf("deliveries %v", deliveries())
		}
		return nil
	})
	// A burst: ten keys at once, then quiet.
	for i := range 10 {
		etcdtest.Put(t, c, fmt.Sprintf("/se/k%d", i), "1")
	}
	testkit.Eventually(t, func() error {
		if len(deliveries()) < 2 {
			return fmt.Errorf("deliveries %v", deliveries())
		}
		return nil
	})
	if d := deliveries(); len(d) != 2 || d[1] != "2/10/0" {
		t.Fatalf("a burst of 10 puts gave the deliveries %v, want one more, 2/10/0", d)
	}
	// A stream: a put every 100 ms for 10 s, never quiet for MIN (2 s).
	start := time.Now()
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		etcdtest.Put(t, c, "/se/stream", fmt.Sprint(i))
		time.Sleep(100 * time.Millisecond)
	}
	during := len(deliveries()) - 2
	if during < 2 {
		t.Errorf("a 10 s stream was delivered %d times while it lasted, want every MAX (4 s): %v; stderr:\n%s", during, deliveries(), stderr)
	}
}
