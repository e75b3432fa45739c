//go:build unix

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// changeIndentForTest starts each line of -o text that says what an
// update changed.
const changeIndentForTest = "           ."

// TestE2EDemo runs scripts/demo.sh (what `make demo` runs after building)
// as a user would, stdout and stderr in one stream, and checks that it
// prints no error line before its first event, shows the human view with
// what changed, and ends by telling how to get the JSON stream.
func TestE2EDemo(t *testing.T) {
	t.Parallel()
	event := regexp.MustCompile(`^\d\d:\d\d:\d\d (new|updated|deleted) `)
	bad := regexp.MustCompile(`(?i)error|refused|reconnect|unavailable|warning|exited`)
	// The demo follows for DEMO_SECONDS, which include starting an etcd and
	// listing; on a loaded machine the first try may end before the first
	// event. Longer tries then; the check is on what comes before it.
	for _, secs := range []int{5, 15, 40} {
		addr, err := unusedAddr()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*timeout+60e9)
		cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "demo.sh"), binary(t))
		cmd.Env = []string{"PATH=/usr/bin:/bin", "DEMO_ADDR=" + addr, "DEMO_SECONDS=" + strconv.Itoa(secs)}
		out, err := cmd.CombinedOutput()
		cancel()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		first := -1
		for i, l := range lines {
			if event.MatchString(l) {
				first = i
				break
			}
		}
		if err != nil && first >= 0 {
			t.Fatalf("demo failed: %v\n%s", err, out)
		}
		if first < 0 {
			t.Logf("no event within DEMO_SECONDS=%d (%v):\n%s", secs, err, out)
			continue
		}
		for _, l := range lines[:first] {
			if bad.MatchString(l) {
				t.Errorf("before the first event: %q", l)
			}
		}
		for i, l := range lines[first:] {
			if strings.Contains(l, " updated ") && (first+i+1 == len(lines) || !strings.HasPrefix(lines[first+i+1], changeIndentForTest)) {
				t.Errorf("an update without what changed: %q", l)
			}
		}
		if strings.Contains(string(out), "\x1b") {
			t.Errorf("escape codes in the output of a demo that is not on a terminal:\n%q", out)
		}
		last := lines[len(lines)-1]
		if !strings.Contains(last, "| jq ") {
			t.Errorf("the demo does not end with a jq example: %q", last)
		} else if _, err := exec.LookPath("jq"); err == nil {
			// Pasted as it is, in a shell whose PATH has no nodewatch.
			paste := exec.Command("bash", "-c", last)
			paste.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := paste.CombinedOutput()
			if err != nil || !strings.Contains(string(out), `"type":"new"`) {
				t.Errorf("the demo's last line, pasted, printed no node (%v):\n%s", err, out)
			}
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out)
		}
		return
	}
	t.Fatal("the demo printed no event, however long it ran")
}
