//go:build unix

package render_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/render"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestCheckRefuses: a --check that fails leaves the file byte for byte as
// it was, with nothing beside it, and no reload; it is reported, the
// first time in full with what the check printed, then at most every
// ReportEvery with a count; the next content it approves replaces the file.
func TestCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "app.conf")
	reloads := filepath.Join(dir, "reloads")
	old := "good 0\n\x00 binary \xff\n"
	if err := os.WriteFile(to, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, to)
	before := stat(t, to)
	r := &render.Renderer{
		Targets: []render.Target{{Program: program(t, "."), To: to}},
		Check:   `grep -q '^good' "$1" || { echo "no good: $(head -c 3 "$1")" >&2; exit 3; }`,
		Reload:  "echo >> " + shellQuote(reloads),
	}
	log := logs(r)
	clock := newClock(r)

	for i := range 5 {
		renderOK(t, r, "bad "+strings.Repeat("x", i))
		if r.InStep() {
			t.Errorf("InStep after a refusal")
		}
		clock.Add(time.Second)
	}
	if got := read(t, to); got != old {
		t.Errorf("the file holds %q after refusals, want %q", got, old)
	}
	if after := stat(t, to); after != before {
		t.Errorf("the file was touched: %+v, then %+v", before, after)
	}
	noTemps(t, dir)
	if got := lines(t, reloads); len(got) != 0 {
		t.Errorf("reloads after refusals: %d", len(got))
	}
	want := "--to " + to + ": --check refused the new content (exit status 3); the file is left as it was. It printed:\nno good: bad\n"
	if got := log.String(); got != want {
		t.Errorf("reported\n%s\nwant\n%s", got, want)
	}

	clock.Add(render.ReportEvery)
	renderOK(t, r, "bad again")
	if got := countLines(log.String(), "--check refused"); got != 2 {
		t.Errorf("%d reports, want 2 once ReportEvery passed:\n%s", got, log)
	}
	if !strings.Contains(log.String(), "(and 4 more times since 03:04:05)") {
		t.Errorf("the second report does not count those held back:\n%s", log)
	}

	renderOK(t, r, "good 1")
	if !r.InStep() {
		t.Errorf("not InStep after an approved content replaced the file")
	}
	if got := read(t, to); got != "good 1\n" {
		t.Errorf("an approved content: the file holds %q", got)
	}
	if got := stat(t, to).mode; got != 0o600 {
		t.Errorf("mode %v, want 0600 kept", got)
	}
	if !strings.HasSuffix(log.String(), "--to "+to+": --check approves again\n") {
		t.Errorf("the approval after refusals is not reported:\n%s", log)
	}
	if got := lines(t, reloads); len(got) != 1 {
		t.Errorf("reloads: %d, want 1", len(got))
	}
	noTemps(t, dir)
}

// TestCheckSees: the check gets the new content in a temporary file
// beside the file, with its final mode, named in $1 and in
// NODEWATCH_RENDER_FILE, and the file in NODEWATCH_RENDER_TO.
func TestCheckSees(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "app.conf")
	if err := os.WriteFile(to, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(t.TempDir(), "seen")
	r := &render.Renderer{
		Targets: []render.Target{{Program: program(t, serversProgram), To: to}},
		Check: `{ echo "$#"; echo "$1"; echo "$NODEWATCH_RENDER_FILE"; echo "$NODEWATCH_RENDER_TO"; stat -c %a "$1"; cat "$1"; } > ` +
			shellQuote(seen),
	}
	renderOK(t, r, servers("a", "b"))
	got := lines(t, seen)
	if len(got) != 7 {
		t.Fatalf("the check wrote %q", got)
	}
	if got[0] != "1" || got[1] != got[2] || got[3] != to || got[4] != "640" ||
		got[5]+"\n"+got[6]+"\n" != read(t, to) {
		t.Errorf("the check saw %q", got)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(dir) + `/\.app\.conf\.nodewatch-[0-9]+$`).MatchString(got[1]) {
		t.Errorf("the temporary file %s is not .app.conf.nodewatch-N beside the file", got[1])
	}
	noTemps(t, dir)
}

// TestCheckTimeout: a check that outlives Timeout is a refusal.
func TestCheckTimeout(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "app.conf")
	r := &render.Renderer{
		Targets: []render.Target{{Program: program(t, "."), To: to}},
		Check:   "sleep 60",
		Timeout: 100 * time.Millisecond,
		Grace:   100 * time.Millisecond,
	}
	log := logs(r)
	renderOK(t, r, "x")
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("the file was written: %v", err)
	}
	if !strings.Contains(log.String(), "timed out after 100ms") {
		t.Errorf("reported:\n%s", log)
	}
	noTemps(t, dir)
}

// TestCheckCancel: a Render whose context ends while the check runs
// ends the check, leaves the file as it was and nothing beside it, and
// returns the context's error.
func TestCheckCancel(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "app.conf")
	if err := os.WriteFile(to, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(t.TempDir(), "started")
	r := &render.Renderer{
		Targets: []render.Target{{Program: program(t, "."), To: to}},
		Check:   "touch " + shellQuote(started) + "; sleep 60",
		Grace:   time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Render(ctx, "new", 1) }()
	testkit.Eventually(t, func() error { _, err := os.Stat(started); return err })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Render: %v, want %v", err, context.Canceled)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("Render did not return once its context ended")
	}
	if got := read(t, to); got != "old\n" {
		t.Errorf("the file holds %q", got)
	}
	noTemps(t, dir)
}
