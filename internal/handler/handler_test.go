//go:build unix

package handler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handler"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// done is the end of the batch the handlers of these tests are run for.
var done = flow.Event{
	Type:   flow.BatchDone,
	Batch:  7,
	Rev:    4242,
	Synced: true,
	Cause:  flow.CauseResume,
	Counts: flow.Counts{New: 1, Updated: 20, Deleted: 300},
}

// run runs command as a handler with input and no timeout, and returns
// Run's error.
func run(t *testing.T, command string, input []byte) error {
	t.Helper()
	h := &handler.Handler{Command: command}
	return h.Run(context.Background(), input, done, 1)
}

func TestExit(t *testing.T) {
	for _, c := range []struct {
		command string
		want    string // Run's error; "" for nil
	}{
		{"exit 0", ""},
		{"true", ""},
		{"exit 3", "exit status 3"},
		{"exit 255", "exit status 255"},
		{"false", "exit status 1"},
		{"/nonexistent/handler", "exit status 127"},
		{"kill -KILL $$", "killed by " + syscall.SIGKILL.String()},
		{"kill -TERM $$", "killed by " + syscall.SIGTERM.String()},
	} {
		t.Run(c.command, func(t *testing.T) {
			err := run(t, c.command, nil)
			if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
				t.Errorf("Run: %v, want %q", err, c.want)
			}
		})
	}
}

// TestStdin: the handler reads exactly the input, however long, and one
// that does not read it all is not failed for that.
func TestStdin(t *testing.T) {
	long := make([]byte, 1<<20+17) // beyond a pipe's buffer
	rand.NewChaCha8([32]byte{7}).Read(long)
	lines := []byte(strings.Repeat(`{"type":"new","id":"/nodes/a","object":{"x":1}}`+"\n", 500))
	for _, c := range []struct {
		name  string
		input []byte
	}{
		{"none", nil},
		{"lines", lines},
		{"no newline at the end", []byte(`{"type":"batch_done"}`)},
		{"binary, 1 MiB", long},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stdin")
			if err := run(t, "cat > "+out, c.input); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.input) {
				t.Errorf("the handler read %d bytes, want the %d of the input (equal to %d)", len(got), len(c.input), commonPrefix(got, c.input))
			}
		})
	}
	for _, command := range []string{"true", "head -c 10 >/dev/null", "exec 0<&-; sleep 0.1"} {
		t.Run("not read: "+command, func(t *testing.T) {
			if err := run(t, command, long); err != nil {
				t.Errorf("Run: %v, want nil", err)
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestEnv(t *testing.T) {
	want := []string{
		"NODEWATCH_BATCH=7",
		"NODEWATCH_CAUSE=resume",
		"NODEWATCH_SYNCED=true",
		"NODEWATCH_REV=4242",
		"NODEWATCH_NEW=1",
		"NODEWATCH_UPDATED=20",
		"NODEWATCH_DELETED=300",
		"NODEWATCH_ATTEMPT=3",
	}
	if got := handler.Env(done, 3); !slices.Equal(got, want) {
		t.Errorf("Env:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := handler.Env(flow.Event{Type: flow.BatchDone, Batch: 1}, 1); !slices.Equal(got, []string{
		"NODEWATCH_BATCH=1", "NODEWATCH_CAUSE=change", "NODEWATCH_SYNCED=false", "NODEWATCH_REV=0",
		"NODEWATCH_NEW=0", "NODEWATCH_UPDATED=0", "NODEWATCH_DELETED=0", "NODEWATCH_ATTEMPT=1",
	}) {
		t.Errorf("Env of a first change batch: %q", got)
	}

	// The handler has them, beside what nodewatch inherited, and in
	// place of what nodewatch inherited under the same names (a handler
	// that runs nodewatch, say).
	t.Setenv("NODEWATCH_BATCH", "stale")
	t.Setenv("NODEWATCH_ATTEMPT", "stale")
	t.Setenv("NODEWATCH_TEST_INHERITED", "inherited value")
	out := filepath.Join(t.TempDir(), "env")
	h := &handler.Handler{Command: "env > " + out}
	if err := h.Run(context.Background(), nil, done, 3); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "NODEWATCH_") || strings.HasPrefix(l, "PATH=") {
			got = append(got, l)
		}
	}
	want = append(want, "NODEWATCH_TEST_INHERITED=inherited value", "PATH="+os.Getenv("PATH"))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the handler's environment:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOutput(t *testing.T) {
	var stdout, stderr testkit.Buffer
	h := &handler.Handler{Command: "echo to stdout; echo to stderr >&2; cat", Stdout: &stdout, Stderr: &stderr}
	if err := h.Run(context.Background(), []byte("input\n"), done, 1); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "to stdout\ninput\n" || stderr.String() != "to stderr\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	// With none, they are discarded.
	h = &handler.Handler{Command: "echo to stdout; echo to stderr >&2"}
	if err := h.Run(context.Background(), nil, done, 1); err != nil {
		t.Fatal(err)
	}
}

// TestOutputLeftOpen: a handler that exits 0 and leaves a child that
// holds its stdout has succeeded; the run ends with the handler (and
// WaitDelay), not with the child.
func TestOutputLeftOpen(t *testing.T) {
	dir := t.TempDir()
	var stdout testkit.Buffer
	h := &handler.Handler{Command: script(dir, bg("sleep 60"), "echo done"), Stdout: &stdout}
	if err := h.Run(context.Background(), nil, done, 1); err != nil {
		t.Errorf("Run: %v, want nil", err)
	}
	started(t, dir) // kills the sleep when the test ends
	if stdout.String() != "done\n" {
		t.Errorf("stdout %q", stdout.String())
	}
}

// group is the process group of a handler, which it names in a file
// (its shell's pid, $$, in dir/pid) once it has started, and the
// children it started in the background (their pids, $!, in dir/kids).
type group struct {
	pgid int
	dir  string
}

// started waits for the handler to have written its pid to dir/pid,
// and returns its process group. The group is killed when the test ends,
// whatever the test found.
func started(t *testing.T, dir string) group {
	t.Helper()
	g := group{dir: dir}
	testkit.Eventually(t, func() error {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return err
		}
		g.pgid, err = strconv.Atoi(string(bytes.TrimSpace(b)))
		return err
	})
	t.Cleanup(func() { syscall.Kill(-g.pgid, syscall.SIGKILL) })
	// A handler that still runs leads a process group of its own.
	if st, ok := stat(g.pgid); ok && st.pgrp != g.pgid {
		t.Errorf("the handler (pid %d) is in process group %d, not in its own", g.pgid, st.pgrp)
	}
	return g
}

type procStat struct {
	state string
	pgrp  int
}

// stat returns the state and process group of process pid, and whether
// it exists and has not ended. Zombies have ended: the shell's children
// that outlive it are reparented to init, which may take its time to
// reap them (and kill(-pgid, 0) finds the group until it has).
func stat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp …; comm may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	fs := strings.Fields(string(b[i+1:]))
	if len(fs) < 3 || fs[0] == "Z" || fs[0] == "X" {
		return procStat{}, false
	}
	pgrp, _ := strconv.Atoi(fs[2])
	return procStat{fs[0], pgrp}, true
}

// alive returns the processes of the group, and the children the
// handler named, that have not ended.
func (g group) alive(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := stat(pid); ok && st.pgrp == g.pgid {
				pids = append(pids, pid)
			}
		}
	}
	kids, _ := os.ReadFile(filepath.Join(g.dir, "kids"))
	for _, f := range strings.Fields(string(kids)) {
		if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
			if _, ok := stat(pid); ok {
				pids = append(pids, pid)
			}
		}
	}
	var ps []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		ps = append(ps, strconv.Itoa(pid)+" "+string(bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '})))
	}
	return ps
}

// gone waits for every process of the group to have ended: they were
// sent a signal that ends them, which takes effect when each next runs.
func (g group) gone(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, func() error {
		if ps := g.alive(t); len(ps) > 0 {
			return fmt.Errorf("of the handler's process group %d, %q still run", g.pgid, ps)
		}
		return nil
	})
}

// bg is the setup of a script that starts command in the background.
func bg(command string) string { return command + " & echo $! >> kids\n" }

// script returns the command of a handler that, in dir, runs setup, then
// writes its pid to dir/pid (so that a test knows when setup is done),
// then runs body. What the handler starts in the background it starts in
// setup: a child forked after the test sent its signal would not get it.
func script(dir, setup, body string) string {
	return fmt.Sprintf("cd %s || exit 99\n%s\necho $$ > pid.tmp && mv pid.tmp pid || exit 99\n%s", dir, setup, body)
}

// timeOut runs h, whose command is a script in dir, with a timeout of
// first, and returns its process group, how long Run took and what it
// returned. The timeout must come once the handler has started (written
// its pid): on a loaded machine the shell may take long to start, and the
// handler is run again with a longer one.
func timeOut(t *testing.T, h *handler.Handler, dir string, first time.Duration) (g group, took time.Duration, err error) {
	t.Helper()
	for h.Timeout = first; h.Timeout <= testkit.Timeout; h.Timeout *= 4 {
		os.Remove(filepath.Join(dir, "pid"))
		start := time.Now()
		err := h.Run(context.Background(), nil, done, 1)
		took := time.Since(start)
		if _, serr := os.Stat(filepath.Join(dir, "pid")); serr != nil {
			t.Logf("the handler did not start within its timeout of %v (Run: %v)", h.Timeout, err)
			continue
		}
		return started(t, dir), took, err
	}
	t.Fatalf("the handler did not start within %v", h.Timeout/4)
	return
}

func TestTimeout(t *testing.T) {
	dir := t.TempDir()
	// A handler that started a child in the background and waits.
	h := &handler.Handler{
		Command: script(dir, bg("sleep 60"), "sleep 60; wait"),
		Grace:   testkit.Timeout, // TERM ends it: no KILL is waited for
	}
	g, took, err := timeOut(t, h, dir, 200*time.Millisecond)
	if err == nil || err.Error() != "timed out after "+h.Timeout.String()+" (--exec-timeout)" {
		t.Errorf("Run: %v, want a timeout", err)
	}
	if took < h.Timeout || took > testkit.Timeout {
		t.Errorf("Run took %v, want a little over %v", took, h.Timeout)
	}
	g.gone(t)
}

// TestTimeoutGrace: a handler that ignores SIGTERM is killed Grace
// later, with all it started.
func TestTimeoutGrace(t *testing.T) {
	dir := t.TempDir()
	h := &handler.Handler{
		// sh's trap '' is inherited: the sleeps ignore TERM too.
		Command: script(dir, "trap '' TERM\n"+bg("sleep 60"), "sleep 60"),
		Grace:   300 * time.Millisecond,
	}
	g, took, err := timeOut(t, h, dir, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out after "+h.Timeout.String()) {
		t.Errorf("Run: %v, want a timeout", err)
	}
	if took < h.Timeout+h.Grace || took > testkit.Timeout {
		t.Errorf("Run took %v, want a little over %v (timeout and grace)", took, h.Timeout+h.Grace)
	}
	g.gone(t)
}

// ctxRun runs h in a goroutine and returns what it returns.
func ctxRun(ctx context.Context, h *handler.Handler) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- h.Run(ctx, nil, done, 1) }()
	return ch
}

// TestSignal: when its context ends, the handler gets the signal that
// ended it (the cause handler.Signal), else SIGTERM, and Run returns the
// context's error once the handler has exited.
func TestSignal(t *testing.T) {
	for _, c := range []struct {
		name   string
		cancel func(context.CancelCauseFunc)
		want   string
	}{
		{"SIGINT", func(cancel context.CancelCauseFunc) { cancel(handler.Signal{Signal: syscall.SIGINT}) }, "INT"},
		{"SIGHUP, wrapped", func(cancel context.CancelCauseFunc) {
			cancel(fmt.Errorf("stopping: %w", handler.Signal{Signal: syscall.SIGHUP}))
		}, "HUP"},
		{"no signal", func(cancel context.CancelCauseFunc) { cancel(nil) }, "TERM"},
		{"another cause", func(cancel context.CancelCauseFunc) { cancel(errors.New("stdout closed")) }, "TERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var traps string
			for _, sig := range []string{"INT", "HUP", "TERM"} {
				traps += fmt.Sprintf("trap 'echo got %s > got; exit 0' %s; ", sig, sig)
			}
			h := &handler.Handler{Command: script(dir, traps+bg("sleep 60"), "wait"), Grace: testkit.Timeout}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			ch := ctxRun(ctx, h)
			g := started(t, dir)
			c.cancel(cancel)
			if err := testkit.Receive(t, ch, "return of Run"); err != context.Canceled {
				t.Errorf("Run: %v, want %v", err, context.Canceled)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "got")); string(b) != "got "+c.want+"\n" {
				t.Errorf("the handler wrote %q (%v), want it to have got SIG%s", b, err, c.want)
			}
			// With SIGINT, the `sleep 60 &` outlives the handler: sh runs
			// it with SIGINT ignored. See TestSignalEndsGroup.
			g.gone(t)
		})
	}
}

// TestSignalGrace: a handler that ignores the signal is killed Grace
// later, with all it started, and Run returns the context's error.
func TestSignalGrace(t *testing.T) {
	dir := t.TempDir()
	h := &handler.Handler{Command: script(dir, "trap '' INT TERM\n"+bg("sleep 60"), "sleep 60"), Grace: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	ch := ctxRun(ctx, h)
	g := started(t, dir)
	start := time.Now()
	cancelCause(handler.Signal{Signal: syscall.SIGINT})
	if err := testkit.Receive(t, ch, "return of Run"); err != context.Canceled {
		t.Errorf("Run: %v, want %v", err, context.Canceled)
	}
	if took := time.Since(start); took < h.Grace {
		t.Errorf("Run returned %v after the signal, before the grace of %v", took, h.Grace)
	}
	g.gone(t)
}

// TestSignalEndsGroup: what a handler started is ended with it, also
// when the handler exits on the signal and a child ignores it (sh runs a
// `cmd &` with SIGINT ignored).
func TestSignalEndsGroup(t *testing.T) {
	dir := t.TempDir()
	h := &handler.Handler{Command: script(dir, "trap 'exit 0' INT\n"+bg("sleep 60"), "wait"), Grace: 300 * time.Millisecond}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ch := ctxRun(ctx, h)
	g := started(t, dir)
	cancel(handler.Signal{Signal: syscall.SIGINT})
	if err := testkit.Receive(t, ch, "return of Run"); err != context.Canceled {
		t.Errorf("Run: %v, want %v", err, context.Canceled)
	}
	g.gone(t)
}

// TestTimeoutEndsGroup: as TestSignalEndsGroup, for a timeout and a
// child that ignores SIGTERM.
func TestTimeoutEndsGroup(t *testing.T) {
	dir := t.TempDir()
	h := &handler.Handler{
		Command: script(dir, bg("(trap '' TERM; sleep 60)"), "sleep 60"),
		Grace:   300 * time.Millisecond,
	}
	g, _, err := timeOut(t, h, dir, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("Run: %v, want a timeout", err)
	}
	g.gone(t)
}

// knownBug skips t, which fails on the code as it is, unless
// NODEWATCH_TEST_KNOWN_BUGS is set.
func knownBug(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("NODEWATCH_TEST_KNOWN_BUGS") == "" {
		t.Skip("known bug (NODEWATCH_TEST_KNOWN_BUGS=1 runs it): " + why)
	}
}

// TestTimeoutGraceForGroup: the grace is the process group's, not only
// the handler's: a child that cleans up on SIGTERM gets it, although the
// shell that started it ended at once.
func TestTimeoutGraceForGroup(t *testing.T) {
	knownBug(t, "end() sends SIGKILL to the group as soon as the handler exits")
	dir := t.TempDir()
	h := &handler.Handler{
		Command: script(dir, bg("(trap 'sleep 0.2; echo cleaned up > cleaned; exit 0' TERM; sleep 60 & wait)"), "sleep 60"),
		Grace:   testkit.Timeout,
	}
	g, _, err := timeOut(t, h, dir, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("Run: %v, want a timeout", err)
	}
	g.gone(t)
	if b, err := os.ReadFile(filepath.Join(dir, "cleaned")); string(b) != "cleaned up\n" {
		t.Errorf("the child did not clean up in its grace: %q, %v", b, err)
	}
}

func BenchmarkRun(b *testing.B) {
	input := bytes.Repeat([]byte(`{"type":"updated","id":"/nodes/00000001","object":{"state":"UP"}}`+"\n"), 10<<10/66+1)[:10<<10]
	for _, c := range []struct {
		name, command string
		input         []byte
	}{
		{"true", "true", nil},
		{"cat>/dev/null,10KiB", "cat >/dev/null", input},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := &handler.Handler{Command: c.command}
			b.ReportAllocs()
			for b.Loop() {
				if err := h.Run(context.Background(), c.input, done, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
