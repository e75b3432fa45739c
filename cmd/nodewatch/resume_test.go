//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestE2EStateRevertAfterKill: a handler is given /r/k's change from v1
// to v2, and while it runs, nodewatch and the handler are killed
// (SIGKILL to both process groups, as systemd ends a unit that crashed
// or was killed for memory). While nothing runs, /r/k goes back to v1:
// the recorded view and etcd agree, but the handler's world says v2. The
// run that resumes tells the handler, under the same batch number:
// updated to v1, prev v2.
func TestE2EStateRevertAfterKill(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/r/k", `"v1"`)
	dir, st := t.TempDir(), filepath.Join(t.TempDir(), "state")
	// The handler saves its input, and in the first run, given v2, it
	// notes its process group and hangs, until it is killed.
	handler := saveInput + `; if [ "$INC" = 1 ] && grep -q '"v2"' "$f"; then echo $$ > "$DIR/hang.tmp"; mv "$DIR/hang.tmp" "$DIR/hang"; exec sleep 600; fi`
	var stderr testkit.Buffer
	start := func(inc int) *startedRun {
		cmd := command(t, "key", "/r/k", "--etcd", ep, "--state", st, "--exec", handler)
		cmd.Env = append(cmd.Env, "DIR="+dir, "INC="+strconv.Itoa(inc))
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := &startedRun{done: make(chan struct{})}
		go func() { cmd.Wait(); close(r.done) }()
		r.kill = func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if b, err := os.ReadFile(filepath.Join(dir, "hang")); err == nil {
				// The handler, in a process group of its own, holds
				// stderr open: Wait waits for it.
				pg, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				syscall.Kill(-pg, syscall.SIGKILL)
			}
			<-r.done
		}
		return r
	}
	waitInput := func(what string, ok func([]input) bool) []input {
		t.Helper()
		for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
			if ins := inputs(t, dir); ok(ins) {
				return ins
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v; inputs %v; stderr %s", what, timeout, inputs(t, dir), &stderr)
			}
		}
	}

	first := start(1)
	waitInput("initial batch", func(ins []input) bool { return len(ins) == 1 })
	etcdtest.Put(t, c, "/r/k", `"v2"`)
	var hang []byte
	for deadline := time.Now().Add(timeout); hang == nil; time.Sleep(10 * time.Millisecond) {
		hang, _ = os.ReadFile(filepath.Join(dir, "hang"))
		if time.Now().After(deadline) {
			t.Fatalf("the handler was not given v2 within %v; stderr %s", timeout, &stderr)
		}
	}
	pg, err := strconv.Atoi(strings.TrimSpace(string(hang)))
	if err != nil {
		t.Fatal(err)
	}
	if pg <= 1 {
		t.Fatalf("the handler's process group: %d", pg)
	}
	first.kill()
	os.Remove(filepath.Join(dir, "hang"))
	etcdtest.Put(t, c, "/r/k", `"v1"`)

	second := start(2)
	defer second.kill()
	ins := waitInput("resumed batch", func(ins []input) bool { return len(ins) == 3 })
	got := summarize(t, ins[2].lines)
	want := []string{"updated /r/k v1 prev v2", "batch_done 2 resume"}
	if ins[2].inc != 2 || !slices.Equal(got, want) {
		t.Fatalf("the resumed run's handler got (run %d):\n%q\nwant\n%q", ins[2].inc, got, want)
	}
	if ins[1].batch != 2 || ins[1].inc != 1 {
		t.Fatalf("the killed run's handler got batch %d (run %d), want 2 (run 1)", ins[1].batch, ins[1].inc)
	}
}
