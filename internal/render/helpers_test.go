//go:build unix

package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/render"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// program compiles expr as --render does.
func program(t testing.TB, expr string) *jq.Program {
	t.Helper()
	p, err := jq.Compile("--render", expr, jq.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serversProgram makes a line of an nginx upstream of every object.
const serversProgram = `.[] | "server \(.name):\(.port);"`

// servers is a view of objects named names, as the run hands it over.
func servers(names ...string) []any {
	view := make([]any, len(names))
	for i, n := range names {
		view[i] = map[string]any{"id": "/nodes/" + n, "name": n, "port": 80 + float64(i)}
	}
	return view
}

// renderOK renders view with r and fails the test on an error.
func renderOK(t testing.TB, r *render.Renderer, view any) {
	t.Helper()
	if err := r.Render(context.Background(), view, 1); err != nil {
		t.Fatalf("Render: %v", err)
	}
}

// info is what the tests look at of a file beside its content.
type info struct {
	ino      uint64
	mtime    time.Time
	mode     os.FileMode
	uid, gid uint32
}

func stat(t testing.TB, path string) info {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return info{ino: st.Ino, mtime: fi.ModTime(), mode: fi.Mode(), uid: st.Uid, gid: st.Gid}
}

func read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readOr is the content of path, or none when it does not exist.
func readOr(t testing.TB, path, none string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return none
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// temps returns the temporary files of --render in dir.
func temps(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.nodewatch-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// noTemps fails the test when --render left a temporary file in dir.
func noTemps(t testing.TB, dir string) {
	t.Helper()
	if m := temps(t, dir); len(m) > 0 {
		t.Errorf("temporary files left behind: %q", m)
	}
}

// age sets the times of path an hour back, so that a write shows.
func age(t testing.TB, path string) {
	t.Helper()
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
}

// lines returns the lines of path, none when it does not exist.
func lines(t testing.TB, path string) []string {
	t.Helper()
	s := readOr(t, path, "")
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// clock is a clock of the reports that a test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(r *render.Renderer) *clock {
	c := &clock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	render.SetClock(r, c.Now)
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logs collects what a Renderer logs.
func logs(r *render.Renderer) *testkit.Buffer {
	b := new(testkit.Buffer)
	r.Logf = b.Logf
	return b
}

// countLines returns how many lines of s hold sub.
func countLines(s, sub string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
