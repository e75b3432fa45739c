//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
