//go:build unix

package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The tests' names for testkit's two waits.
const (
	timeout = testkit.Timeout
	quiet   = testkit.Quiet
)

// proc is one in-process run of nodewatch.
type proc struct {
	cancel context.CancelFunc
	lines  chan string // complete stdout lines
	stderr *testkit.Buffer
	done   chan struct{} // closed when run returns
	code   int           // run's result, once done is closed
}

// run is nodewatch without the process around it: it parses args, does
// the work and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(ctx, &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}, args)
}

// start runs nodewatch with args in the background.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with set (if not nil) applied to the run's env.
func startEnv(t *testing.T, set func(*env), args ...string) *proc {
	t.Helper()
	return startHolding(t, 10000, set, args...)
}

// startHolding is startEnv whose stdout holds up to lines lines that the
// test has not read: past them, nodewatch's writes block, as to a pipe
// nobody reads.
func startHolding(t *testing.T, lines int, set func(*env), args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{cancel: cancel, lines: make(chan string, lines), stderr: &testkit.Buffer{}, done: make(chan struct{})}
	out := &lineWriter{lines: p.lines}
	go func() {
		defer close(p.done)
		e := testEnv(strings.NewReader(""), out, p.stderr, nil)
		if set != nil {
			set(e)
		}
		p.code = runEnv(ctx, e, args)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(timeout):
			t.Errorf("nodewatch %s did not end after cancel", strings.Join(args, " "))
		}
	})
	return p
}

// runSync runs nodewatch to the end and returns stdout, stderr and the
// exit code.
func runSync(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runSyncEnv(t, nil, args...)
}

// runSyncEnv is runSync with the variables vars set.
func runSyncEnv(t *testing.T, vars map[string]string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := runEnv(ctx, testEnv(strings.NewReader(""), &stdout, &stderr, vars), args)
	return stdout.String(), stderr.String(), code
}

// testEnv is what an in-process run sees of the world: the process's
// variables, but HOME and XDG_CONFIG_HOME empty (no run reads the files of
// the user running the tests, such as metroctl's credentials), and vars
// over them. (urfave/cli reads the variables of flags, NODEWATCH_CURATOR
// and the like, from the process.)
func testEnv(stdin io.Reader, stdout, stderr io.Writer, vars map[string]string) *env {
	return &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if k == "HOME" || k == "XDG_CONFIG_HOME" {
			return ""
		}
		return os.Getenv(k)
	}}
}

// growing calls try with a --timeout of one second, then three times
// longer, up to timeout, until try says that nodewatch connected before
// its --timeout passed. A --timeout covers connecting and listing too: on
// a loaded machine a short one may pass before nodewatch has listed (it
// exits 3 then, see notConnected), which says nothing about what the test
// checks. The test fails if nodewatch never connects in time.
func growing(t *testing.T, try func(d time.Duration) (connected bool)) {
	t.Helper()
	for d := time.Second; ; d = min(3*d, timeout) {
		if try(d) {
			return
		}
		if d == timeout {
			t.Fatalf("nodewatch did not connect within --timeout %v", d)
		}
		t.Logf("nodewatch did not connect within --timeout %v on this machine; trying a longer one", d)
	}
}

// notConnected reports whether a run ended because its --timeout passed
// before it connected.
func notConnected(code int, stderr string) bool {
	return code == exitUnavailable && strings.Contains(stderr, "no connection to ") && strings.Contains(stderr, "within --timeout")
}

// next returns the next stdout line.
func (p *proc) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-time.After(timeout):
		t.Fatalf("no output line within %v; stderr:\n%s", timeout, p.stderr)
	}
	return ""
}

// batch returns the lines up to and including the next batch_done.
func (p *proc) batch(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		l := p.next(t)
		out = append(out, l)
		if strings.HasPrefix(l, `{"type":"batch_done"`) {
			return out
		}
	}
}

// none asserts that no line arrives for a while.
func (p *proc) none(t *testing.T) {
	t.Helper()
	select {
	case l := <-p.lines:
		t.Fatalf("unexpected output line: %s", l)
	case <-time.After(quiet):
	}
}

// wait returns the exit code once nodewatch ends by itself.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("nodewatch did not exit within %v", timeout)
	}
	return -1
}

// lineWriter sends every complete line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// golden compares got with testdata/<test name>.ndjson, or rewrites it
// with -update.
func golden(t *testing.T, got []string) {
	t.Helper()
	path := filepath.Join("testdata", filepath.FromSlash(t.Name())+".ndjson")
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(text, "\n")); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}
