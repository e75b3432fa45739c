//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// saveInput is an --exec handler that keeps each input it gets in DIR,
// as b-BATCH-INC-ATTEMPT (INC: the environment's, which tests set per
// run of nodewatch), written whole or not at all.
const saveInput = `f="$DIR/b-$(printf %08d "$NODEWATCH_BATCH")-${INC:-0}-$NODEWATCH_ATTEMPT"; cat > "$f.tmp" && mv "$f.tmp" "$f"`

// input is one saved handler input.
type input struct {
	batch, inc, attempt int
	lines               []string
}

// inputs reads the inputs saved by saveInput in dir, by batch, then run.
func inputs(t *testing.T, dir string) []input {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "b-*"))
	var ins []input
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			continue
		}
		var in input
		if _, err := fmt.Sscanf(filepath.Base(name), "b-%d-%d-%d", &in.batch, &in.inc, &in.attempt); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		in.lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		ins = append(ins, in)
	}
	slices.SortFunc(ins, func(a, b input) int {
		return cmpInts(a.batch, b.batch, a.inc, b.inc, a.attempt, b.attempt)
	})
	return ins
}

func cmpInts(ab ...int) int {
	for i := 0; i < len(ab); i += 2 {
		if c := ab[i] - ab[i+1]; c != 0 {
			return c
		}
	}
	return 0
}

// replayInputs replays ins, the last copy of each batch number only, and
// returns the checker.
func replayInputs(t *testing.T, ins []input, revs bool) (*replay.Checker, error) {
	t.Helper()
	c := &replay.Checker{Revs: revs}
	for i, in := range ins {
		if i+1 < len(ins) && ins[i+1].batch == in.batch {
			continue // delivered again later
		}
		// A resumed run's first batch delivers again what a killed run
		// had in flight (whether or not the killed run's handler saved
		// its copy).
		c.Again = nil
		if strings.Contains(in.lines[len(in.lines)-1], `"cause":"resume"`) {
			c.Again = map[string]bool{}
			for _, l := range in.lines {
				var ev struct{ ID string }
				json.Unmarshal([]byte(l), &ev)
				c.Again[ev.ID] = true
			}
		}
		for _, l := range in.lines {
			if err := c.Line([]byte(l)); err != nil {
				return c, fmt.Errorf("batch %d (run %d): %w", in.batch, in.inc, err)
			}
		}
	}
	return c, nil
}

// etcdState reads every key under prefix, as the objects `key` prints.
func etcdState(t *testing.T, c *clientv3.Client, prefix string) map[string]any {
	t.Helper()
	resp, err := c.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, kv := range resp.Kvs {
		want[string(kv.Key)] = fmt.Sprintf(`{"create_revision":%d,"key":%q,"lease":0,"mod_revision":%d,"value":%s,"version":%d}`,
			kv.CreateRevision, kv.Key, kv.ModRevision, kv.Value, kv.Version)
	}
	return want
}

// writeLoad changes keys under prefix at random, as fast as etcd takes
// them, until stop is closed; it returns the number of changes.
func writeLoad(t *testing.T, c *clientv3.Client, prefix string, seed uint64, stop <-chan struct{}) <-chan int {
	n := make(chan int, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 0))
		changes := 0
		defer func() { n <- changes }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("%s%02d", prefix, rng.IntN(30))
			var err error
			if rng.IntN(5) == 0 {
				_, err = c.Delete(context.Background(), key)
			} else {
				_, err = c.Put(context.Background(), key, fmt.Sprintf(`{"n":%d}`, changes))
			}
			if err != nil {
				t.Errorf("write: %v", err)
				return
			}
			changes++
		}
	}()
	return n
}

// converge waits until the saved inputs, replayed, equal etcd under
// prefix, and returns them.
func converge(t *testing.T, dir string, c *clientv3.Client, prefix string, stderr *testkit.Buffer) []input {
	t.Helper()
	want := etcdState(t, c, prefix)
	var diff string
	var ins []input
	err := testkit.Poll(context.Background(), timeout, func() (bool, error) {
		ins = inputs(t, dir)
		ck, err := replayInputs(t, ins, true)
		if err != nil {
			return false, err
		}
		diff = ck.Equal(want)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("the handlers' inputs, replayed: %v\n%s\nstderr: %s", err, diff, stderr)
	}
	return ins
}

// TestE2EExecSlowHandler: a handler that takes a second per run, under
// hundreds of changes a second, runs far fewer times than there are
// changes, and what it was given, replayed, ends equal to etcd.
func TestE2EExecSlowHandler(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	dir := t.TempDir()
	cmd := command(t, "key", "/slow/", "--prefix", "--etcd", ep, "--exec", saveInput+"; sleep 1")
	cmd.Env = append(cmd.Env, "DIR="+dir)
	_, stderr := startLines(t, cmd)
	stop := make(chan struct{})
	changes := writeLoad(t, c, "/slow/", 1, stop)
	// Three handler runs under load.
	testkit.Eventually(t, func() error {
		if n := len(inputs(t, dir)); n < 3 {
			return fmt.Errorf("%d handler runs", n)
		}
		return nil
	})
	close(stop)
	n := <-changes
	ins := converge(t, dir, c, "/slow/", stderr)
	if len(ins) > n/10 {
		t.Fatalf("%d handler runs for %d changes: the slow handler worked through a backlog", len(ins), n)
	}
	t.Logf("%d changes, %d handler runs", n, len(ins))
}

// TestE2EExecRetry: a handler that fails twice, then succeeds, gets the
// same batch again each time, with what changed meanwhile merged in.
func TestE2EExecRetry(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/retry/a", `1`)
	dir := t.TempDir()
	// The first attempt waits for the test's go-ahead; the first two fail.
	handler := saveInput + `; if [ "$NODEWATCH_ATTEMPT" = 1 ]; then while [ ! -e "$DIR/go" ]; do sleep 0.05; done; fi; [ "$NODEWATCH_ATTEMPT" -ge 3 ] || exit 7`
	cmd := command(t, "key", "/retry/", "--prefix", "--etcd", ep, "--exec", handler)
	cmd.Env = append(cmd.Env, "DIR="+dir)
	_, stderr := startLines(t, cmd)
	testkit.Eventually(t, func() error {
		if len(inputs(t, dir)) < 1 {
			return fmt.Errorf("no handler run yet")
		}
		return nil
	})
	etcdtest.Put(t, c, "/retry/b", `2`)
	etcdtest.Put(t, c, "/retry/a", `3`)
	// Once the queue has the changes (nodewatch reads them while the
	// handler runs), the first attempt may end.
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var ins []input
	testkit.Eventually(t, func() error {
		if ins = inputs(t, dir); len(ins) < 3 {
			return fmt.Errorf("%d attempts; stderr %s", len(ins), stderr)
		}
		return nil
	})
	want := [][]string{{"new /retry/a 1"}, {"new /retry/a 3", "new /retry/b 2"}, {"new /retry/a 3", "new /retry/b 2"}}
	for i, in := range ins {
		if in.batch != 1 || in.attempt != i+1 {
			t.Errorf("input %d: batch %d attempt %d, want batch 1 attempt %d", i, in.batch, in.attempt, i+1)
		}
		var got []string
		for _, l := range in.lines {
			if ev := parseLine[event](t, l); ev.Type != "batch_done" {
				got = append(got, fmt.Sprintf("%s %s %v", ev.Type, ev.ID, ev.Object["value"]))
			}
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("attempt %d got %q, want %q", i+1, got, want[i])
		}
	}
	for _, s := range []string{"the handler of batch 1 failed (exit status 7); retry 1 of 5", "retry 2 of 5"} {
		if !strings.Contains(stderr.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
}

// event is a line as the tests here read it.
type event struct {
	Type   string         `json:"type"`
	ID     string         `json:"id"`
	Object map[string]any `json:"object"`
	Prev   map[string]any `json:"prev"`
	Cause  string         `json:"cause"`
	Batch  int            `json:"batch"`
}

// parseLine decodes an NDJSON line as a T; a line that is not one fails
// the test.
func parseLine[T any](t *testing.T, line string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v
}

// TestE2EExecTimeoutAndRetries: a handler that hangs is ended by
// --exec-timeout, with whatever it started; past --exec-retries the run
// exits 1 saying which batch failed and why.
func TestE2EExecTimeoutAndRetries(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/hang/a", `1`)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	cmd := command(t, "key", "/hang/", "--prefix", "--etcd", ep, "--exec-timeout", "300ms", "--exec-retries", "1",
		"--exec", `sleep 600 & echo $! >> "$DIR/pids"; echo $$ >> "$DIR/pids"; wait`)
	cmd.Env = append(cmd.Env, "DIR="+dir)
	code, _, stderr := runCmd(t, cmd)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitFailure, stderr)
	}
	for _, s := range []string{"the handler of batch 1 failed (timed out after 300ms (--exec-timeout)); retry 1 of 1", "--exec: the handler of batch 1 failed 2 times, the last time: timed out after 300ms"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
	b, _ := os.ReadFile(pids)
	fields := strings.Fields(string(b))
	if len(fields) != 4 {
		t.Fatalf("pids %q, want 2 runs × (sleep, shell)", b)
	}
	for _, f := range fields {
		// Gone, or a zombie that nobody reaps (PID 1 of a container may not).
		if b, err := os.ReadFile("/proc/" + f + "/stat"); err == nil && !bytes.Contains(b, []byte(") Z ")) {
			t.Errorf("pid %s of a timed-out handler still runs: %s", f, b)
		}
	}
}

// TestE2EExecSignal: SIGINT reaches a running handler, which may finish;
// then nodewatch exits 130.
func TestE2EExecSignal(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/sig/a", `1`)
	dir := t.TempDir()
	cmd := command(t, "key", "/sig/", "--prefix", "--etcd", ep,
		"--exec", `trap 'echo INT > "$DIR/got"; exit 0' INT; touch "$DIR/running"; while :; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, "DIR="+dir)
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() error {
		_, err := os.Stat(filepath.Join(dir, "running"))
		return err
	})
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitInterrupted, &stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "INT\n" {
		t.Fatalf("the handler got %q, %v; want INT", b, err)
	}
}

// TestE2EStateResume: a --state run that resumes after deletions,
// updates and creations made while it was down prints exactly those, with
// the prev it printed before, for `key` and for `nodes` through serve.
func TestE2EStateResume(t *testing.T) {
	t.Parallel()
	t.Run("key", func(t *testing.T) {
		t.Parallel()
		ep, c := etcdtest.StartWith(t)
		for _, k := range []string{"a", "b", "c"} {
			etcdtest.Put(t, c, "/res/"+k, `"`+k+`1"`)
		}
		st := filepath.Join(t.TempDir(), "state")
		args := []string{"key", "/res/", "--prefix", "--etcd", ep, "--state", st, "--once", "--equals", ".value"}
		first := runOK(t, args)
		if len(first) != 4 {
			t.Fatalf("first run: %q", first)
		}
		etcdtest.Delete(t, c, "/res/a")
		etcdtest.Put(t, c, "/res/b", `"b2"`)
		etcdtest.Put(t, c, "/res/d", `"d1"`)
		etcdtest.Put(t, c, "/res/c", `"c1"`) // the same value: not news by --equals
		got := summarize(t, runOK(t, args))
		want := []string{"deleted /res/a prev a1", "updated /res/b b2 prev b1", "new /res/d d1", "batch_done 2 resume"}
		if !slices.Equal(got, want) {
			t.Fatalf("resumed run:\n%q\nwant\n%q", got, want)
		}
		if got := summarize(t, runOK(t, args)); !slices.Equal(got, []string{"batch_done 3 resume"}) {
			t.Fatalf("a run with nothing new: %q", got)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		t.Parallel()
		_, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_NEW, ""), node(idB, commonpb.NodeState_NODE_STATE_UP, ""))
		ep := c.Endpoints()[0]
		addr := runServeCommand(t, serveCmd(t, "--etcd", ep)).addr
		st := filepath.Join(t.TempDir(), "state")
		args := []string{"nodes", "--curator", addr, "--state", st, "--once", "--filter", `.state == "NODE_STATE_UP"`}
		if got := summarize(t, runOK(t, args)); !slices.Equal(got, []string{"new metropolis-" + idB, "batch_done 1 initial"}) {
			t.Fatalf("first run: %q", got)
		}
		putNode(t, c, node(idA, commonpb.NodeState_NODE_STATE_UP, ""))
		putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_DECOMMISSIONED, ""))
		// serve's own watch delivers the puts a moment later (up to
		// etcd's 100 ms sync of a watch that has just started): the
		// resumed run is to read them from serve, so wait until serve
		// has them.
		upNow := []string{"new metropolis-" + idA, "batch_done 1 initial"}
		for deadline := time.Now().Add(timeout); ; {
			got := summarize(t, runOK(t, []string{"nodes", "--curator", addr, "--once", "--filter", `.state == "NODE_STATE_UP"`}))
			if slices.Equal(got, upNow) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve still has %q %v after the puts", got, timeout)
			}
		}
		want := []string{"new metropolis-" + idA, "deleted metropolis-" + idB + " prev NODE_STATE_UP", "batch_done 2 resume"}
		if got := summarize(t, runOK(t, args)); !slices.Equal(got, want) {
			t.Fatalf("resumed run:\n%q\nwant\n%q", got, want)
		}
	})
}

// runOK runs nodewatch with args, wants exit 0 and returns its lines.
func runOK(t *testing.T, args []string) []string {
	t.Helper()
	code, out, stderr := runCmd(t, command(t, args...))
	if code != 0 {
		t.Fatalf("%v: exit %d; stderr %s", args, code, stderr)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// summarize renders lines as "type id value [prev value]", where value is
// a key's value or a node's state.
func summarize(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	show := func(o map[string]any) string {
		if v, ok := o["value"]; ok {
			return fmt.Sprint(v)
		}
		return fmt.Sprint(o["state"])
	}
	for _, l := range lines {
		ev := parseLine[event](t, l)
		s := ev.Type + " " + ev.ID
		switch ev.Type {
		case "batch_done":
			s = fmt.Sprintf("batch_done %d %s", ev.Batch, ev.Cause)
		case "new":
			if _, ok := ev.Object["value"]; ok {
				s += " " + show(ev.Object)
			}
		case "updated":
			s += " " + show(ev.Object) + " prev " + show(ev.Prev)
		case "deleted":
			s += " prev " + show(ev.Prev)
		}
		out = append(out, s)
	}
	return out
}

// TestE2EStateBadFiles: a state file that follows something else, that
// another run holds, or that is damaged is refused with exit 2, named,
// and left as it was.
func TestE2EStateBadFiles(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/bad/a", `1`)
	dir := t.TempDir()
	st := filepath.Join(dir, "state")
	runOK(t, []string{"key", "/bad/", "--prefix", "--etcd", ep, "--state", st, "--once"})
	unchanged := fileKeeper(t, st)

	code, _, stderr := runCmd(t, command(t, "key", "/bad/", "--prefix", "--etcd", ep, "--state", st, "--once", "--filter", ".value > 0"))
	if code != exitUsage || !strings.Contains(stderr, "--state "+st+": the file follows another watch: --filter is unset there, \".value > 0\" here; to start afresh, remove the file or give another one") {
		t.Fatalf("other filter: exit %d, stderr %s", code, stderr)
	}
	unchanged()

	// The file of another command: that, and nothing else.
	code, _, stderr = runCmd(t, command(t, "nodes", "--curator", "127.0.0.1:1", "--state", st, "--once"))
	if want := "--state " + st + ": the file follows another watch: it is the state of a \"key\" run, this is a \"nodes\" run; to start afresh"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("another command: exit %d, stderr %s", code, stderr)
	}
	unchanged()

	// A run that holds it.
	holder := command(t, "key", "/bad/", "--prefix", "--etcd", ep, "--state", st)
	lines, _ := startLines(t, holder)
	<-lines // its first batch: it has the file
	code, _, stderr = runCmd(t, command(t, "key", "/bad/", "--prefix", "--etcd", ep, "--state", st, "--once"))
	if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("--state %s: in use (held by pid %d: ", st, holder.Process.Pid)) {
		t.Fatalf("held: exit %d, stderr %s", code, stderr)
	}
	holder.Process.Kill()
	holder.Wait()

	for name, damage := range map[string]func(b []byte) []byte{
		"garbage":   func(b []byte) []byte { return bytes.Repeat([]byte("nodewatch"), len(b)/9) },
		"truncated": func(b []byte) []byte { return b[:len(b)/3] },
		"empty":     func([]byte) []byte { return nil },
	} {
		bad := filepath.Join(dir, name)
		b, _ := os.ReadFile(st)
		if err := os.WriteFile(bad, damage(b), 0o600); err != nil {
			t.Fatal(err)
		}
		unchanged := fileKeeper(t, bad)
		code, _, stderr := runCmd(t, command(t, "key", "/bad/", "--prefix", "--etcd", ep, "--state", bad, "--once"))
		if code != exitUsage || !strings.Contains(stderr, "--state "+bad+": not a usable state file") {
			t.Errorf("%s: exit %d, stderr %s", name, code, stderr)
		}
		unchanged()
	}
}

// fileKeeper notes the bytes, mode and modification time of path, and
// returns a check that they are still the same.
func fileKeeper(t *testing.T, path string) func() {
	t.Helper()
	read := func() string {
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil {
			t.Fatalf("%s: %v %v", path, err, serr)
		}
		return fmt.Sprintf("%x %v %v", b, fi.Mode(), fi.ModTime().UnixNano())
	}
	before := read()
	return func() {
		t.Helper()
		if read() != before {
			t.Fatalf("%s was changed", path)
		}
	}
}

// TestE2EExecKillRestart: under a running workload, nodewatch with
// --state and --exec is killed (SIGKILL, with its handler) at 20 random
// moments and started again each time. Every change reaches the handlers: their inputs,
// replayed, end equal to etcd. A batch is delivered twice only when its
// handler ran when the run was killed, or had finished but the run had
// not yet recorded it: the last batch a killed run gave a handler.
func TestE2EExecKillRestart(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	dir, st := t.TempDir(), filepath.Join(t.TempDir(), "state")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	stop := make(chan struct{})
	changes := writeLoad(t, c, "/kill/", 2, stop)
	var stderr testkit.Buffer
	start := func(inc int) *startedRun {
		// As systemd ends a unit, a kill ends the handler too: each
		// handler notes its process group while it runs.
		cmd := command(t, "key", "/kill/", "--prefix", "--etcd", ep, "--state", st, "--exec", `: > "$DIR/pg-$$"; `+saveInput+`; sleep 0.02; rm "$DIR/pg-$$"`)
		cmd.Env = append(cmd.Env, "DIR="+dir, "INC="+strconv.Itoa(inc))
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := &startedRun{done: make(chan struct{})}
		go func() { cmd.Wait(); close(r.done) }()
		r.kill = func() {
			cmd.Process.Kill()
			<-r.done
			pgs, _ := filepath.Glob(filepath.Join(dir, "pg-*"))
			for _, pg := range pgs {
				pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(pg), "pg-"))
				syscall.Kill(-pid, syscall.SIGKILL)
				os.Remove(pg)
			}
		}
		return r
	}
	const kills = 20
	for inc := 1; inc <= kills; inc++ {
		r := start(inc)
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		select {
		case <-r.done:
			t.Fatalf("run %d ended by itself; stderr %s", inc, &stderr)
		default:
		}
		r.kill()
	}
	close(stop)
	n := <-changes
	last := start(kills + 1)
	defer last.kill()
	ins := converge(t, dir, c, "/kill/", &stderr)

	// The repeats: each is the last batch of its run.
	lastOf := map[int]int{}
	for _, in := range ins {
		lastOf[in.inc] = max(lastOf[in.inc], in.batch)
	}
	repeats := 0
	for i, in := range ins {
		if i+1 < len(ins) && ins[i+1].batch == in.batch {
			repeats++
			if in.batch != lastOf[in.inc] {
				t.Errorf("batch %d of run %d delivered again by run %d, but it was not the last batch of run %d", in.batch, in.inc, ins[i+1].inc, in.inc)
			}
		}
	}
	if repeats > kills {
		t.Errorf("%d batches delivered again, after %d kills", repeats, kills)
	}
	t.Logf("%d changes, %d handler runs, %d batches delivered twice, after %d kills", n, len(ins), repeats, kills)
}

type startedRun struct {
	done chan struct{}
	kill func()
}
