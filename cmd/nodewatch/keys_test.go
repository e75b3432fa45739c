//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestE2EKeys: the binary with several KEYs against a real etcd: one
// view, each key once (a repeat, a prefix inside another), --until over
// that view as an array ending the run with 0 when it holds and 124 when
// --timeout passes first, a usage error with 2; a --state file follows
// the keys followed, whatever their order and repeats, and refuses a run
// with other keys.
func TestE2EKeys(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/k/a", "down", "/k/b/1", "down", "/k/c", "not a KEY")

	t.Run("--until over several keys: exit 0", func(t *testing.T) {
		cmd := command(t, "key", "--etcd", ep, "/k/a", "--prefix", "/k/b/", "/k/a", "/k/b/1",
			"--until", `length == 2 and all(.value == "up")`, "--timeout", timeout.String())
		lines, stderr := startLines(t, cmd)
		want := []string{"new /k/a down", "new /k/b/1 down", "batch_done 1 initial"}
		if got := readLines(t, lines, len(want)); !cmp.Equal(want, got) {
			t.Fatalf("initial batch %q, want %q", got, want)
		}
		etcdtest.Put(t, c, "/k/c", "up") // not a KEY: nothing
		etcdtest.Put(t, c, "/k/a", "up")
		want = []string{"updated /k/a up prev down", "batch_done 2 change"}
		if got := readLines(t, lines, len(want)); !cmp.Equal(want, got) {
			t.Fatalf("after /k/a: %q, want %q", got, want)
		}
		etcdtest.Put(t, c, "/k/b/1", "up")
		want = []string{"updated /k/b/1 up prev down", "batch_done 3 change"}
		if got := readLines(t, lines, len(want)); !cmp.Equal(want, got) {
			t.Fatalf("after /k/b/1: %q, want %q", got, want)
		}
		if err := cmd.Wait(); err != nil || cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("exit %d (%v), want 0; stderr %s", cmd.ProcessState.ExitCode(), err, stderr)
		}
		if _, more := <-lines; more {
			t.Error("lines after the batch that met --until")
		}
	})

	t.Run("--timeout first: exit 124", func(t *testing.T) {
		code, out, stderr := runCmd(t, command(t, "key", "--etcd", ep, "/k/a", "/k/none", "--until", "length == 2", "--timeout", "1s"))
		if code != exitTimeout || !strings.Contains(stderr, "nodewatch: report: 1 object\n") {
			t.Fatalf("exit %d, want %d; stdout %s; stderr %s", code, exitTimeout, out, stderr)
		}
	})

	t.Run("usage: exit 2", func(t *testing.T) {
		code, _, stderr := runCmd(t, command(t, "key", "--etcd", ep, "/k/a", ""))
		if code != exitUsage || !strings.Contains(stderr, "KEY must not be empty") {
			t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, stderr)
		}
	})

	t.Run("--state follows the keys followed", func(t *testing.T) {
		st := filepath.Join(t.TempDir(), "state")
		got := summarize(t, runOK(t, []string{"key", "--etcd", ep, "/k/c", "/k/a", "--state", st, "--once"}))
		if want := []string{"new /k/a up", "new /k/c up", "batch_done 1 initial"}; !cmp.Equal(want, got) {
			t.Fatalf("first run %q, want %q", got, want)
		}
		code, _, stderr := runCmd(t, command(t, "key", "--etcd", ep, "/k/a", "--state", st, "--once"))
		if want := `KEY 2 is "/k/c" there, unset here`; code != exitUsage || !strings.Contains(stderr, want) {
			t.Fatalf("another run with fewer keys: exit %d, stderr %s; want %d, %s", code, stderr, exitUsage, want)
		}
		etcdtest.Put(t, c, "/k/c", "changed")
		got = summarize(t, runOK(t, []string{"key", "--etcd", ep, "/k/a", "/k/c", "/k/a", "--state", st, "--once"}))
		if want := []string{"updated /k/c changed prev up", "batch_done 2 resume"}; !cmp.Equal(want, got) {
			t.Fatalf("the same keys again, in another order, one twice: %q, want %q", got, want)
		}
	})
}

// TestE2EExecEtcdctlEnv: a handler of key (a shell that prints its
// environment) against a real etcd gets etcdctl watch's ETCD_WATCH_* for
// a batch of one change, formatted as etcdctl formats them, and none for
// a batch of several, not even those of nodewatch's own environment.
// With an etcdctl at hand ($NODEWATCH_ETCDCTL, or make etcd-bin's), the
// same handler under etcdctl watch gets the same variables.
func TestE2EExecEtcdctlEnv(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/h/a", `{"x":1}`)
	const handler = `env | grep '^ETCD_WATCH_' | sort; echo end`
	cmd := command(t, "key", "--etcd", ep, "--prefix", "/h/", "--exec", `echo "batch $NODEWATCH_BATCH"; `+handler)
	cmd.Env = append(cmd.Env, "ETCD_WATCH_KEY=nodewatch's own")
	lines, stderr := startLines(t, cmd)
	// block reads a handler's lines up to its end, those of etcdctl's
	// display of the event (its type, key and value) left out.
	block := func(lines <-chan string, stderr *testkit.Buffer) []string {
		t.Helper()
		var got []string
		for {
			select {
			case l, ok := <-lines:
				switch {
				case !ok:
					t.Fatalf("stdout ended after %q; stderr %s", got, stderr)
				case l == "end":
					return got
				case strings.HasPrefix(l, "ETCD_WATCH_") || strings.HasPrefix(l, "batch "):
					got = append(got, l)
				}
			case <-time.After(timeout):
				t.Fatalf("no end after %q", got)
			}
		}
	}
	nodewatch := func() []string { return block(lines, stderr) }
	// etcdctl's, as printWatchCh formats them, sorted.
	etcdctlEnv := func(batch int, rev int64, typ mvccpb.Event_EventType, key, value string) []string {
		return []string{
			fmt.Sprintf("batch %d", batch),
			fmt.Sprintf("ETCD_WATCH_EVENT_TYPE=%q", typ),
			fmt.Sprintf("ETCD_WATCH_KEY=%q", []byte(key)),
			fmt.Sprintf("ETCD_WATCH_REVISION=%d", rev),
			fmt.Sprintf("ETCD_WATCH_VALUE=%q", []byte(value)),
		}
	}
	if got, want := nodewatch(), etcdctlEnv(1, 2, mvccpb.PUT, "/h/a", `{"x":1}`); !cmp.Equal(want, got) {
		t.Fatalf("the initial state, one key: (-want +got)\n%s", cmp.Diff(want, got))
	}
	// etcdctl itself, when there is one (as faults_test.go finds it),
	// watches from the next revision beside nodewatch, with the handler.
	var real func() []string
	if ctl, why := etcdctl(); ctl != "" {
		ectl := exec.Command(ctl, "--endpoints", ep, "watch", "--prefix", "/h/", "--rev", "3", "--", "sh", "-c", handler)
		ectl.Env = []string{"PATH=" + os.Getenv("PATH")}
		ctlLines, ctlStderr := startLines(t, ectl)
		real = func() []string { return block(ctlLines, ctlStderr) }
	} else {
		t.Logf("no etcdctl to compare with: %s", why)
	}
	// same checks that etcdctl gave its handler what nodewatch gave its
	// (without the batch).
	same := func(got []string) {
		t.Helper()
		if real == nil {
			return
		}
		if ctl := real(); !cmp.Equal(ctl, got[1:]) {
			t.Errorf("etcdctl's handler and nodewatch's: (-etcdctl +nodewatch)\n%s", cmp.Diff(ctl, got[1:]))
		}
	}
	batch := 1
	for _, v := range []string{`say "hi"`, `{"y":[1,2.50]}`, "\xff\x01 not UTF-8"} {
		batch++
		rev := etcdtest.Put(t, c, "/h/b", v)
		got := nodewatch()
		if want := etcdctlEnv(batch, rev, mvccpb.PUT, "/h/b", v); !cmp.Equal(want, got) {
			t.Fatalf("a put of %q: (-want +got)\n%s", v, cmp.Diff(want, got))
		}
		same(got)
	}
	if _, err := c.Txn(context.Background()).Then(clientv3.OpPut("/h/a", "2"), clientv3.OpPut("/h/c", "3")).Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := nodewatch(), []string{"batch 5"}; !cmp.Equal(want, got) {
		t.Fatalf("a transaction of two changes: (-want +got)\n%s", cmp.Diff(want, got))
	}
	if real != nil {
		real() // etcdctl runs its handler once per event
		real()
	}
	rev := etcdtest.Delete(t, c, "/h/b")
	got := nodewatch()
	if want := etcdctlEnv(6, rev, mvccpb.DELETE, "/h/b", ""); !cmp.Equal(want, got) {
		t.Fatalf("a deletion: (-want +got)\n%s", cmp.Diff(want, got))
	}
	same(got)
}

// etcdctl returns the etcdctl to compare nodewatch with (its times to
// recover, its handler's variables): $NODEWATCH_ETCDCTL, else the pinned
// one make etcd-bin builds in .bin/; "" and why when there is none.
func etcdctl() (path, why string) {
	path = os.Getenv("NODEWATCH_ETCDCTL")
	if path == "" {
		path = filepath.Join("..", "..", ".bin", "etcdctl")
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		if _, err = os.Stat(abs); err == nil {
			return abs, ""
		}
	}
	return "", fmt.Sprintf("%v (make etcd-bin builds it)", err)
}

// readLines reads n lines and summarizes them.
func readLines(t *testing.T, lines <-chan string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended after %q", got)
			}
			got = append(got, l)
		case <-time.After(timeout):
			t.Fatalf("no line after %q", got)
		}
	}
	return summarize(t, got)
}
