//go:build unix

package main

// End-to-end tests: build the nodewatch binary and run it as a user
// would, through pipes, a pseudo-terminal and signals.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

var (
	buildOnce sync.Once
	binPath   string
	etcdPath  string // nodewatch-etcd, built by TestMain
	buildErr  error
)

// binary builds nodewatch once per test run, with nodewatch-etcd (which
// serve --dev runs; TestMain built it, at etcdPath) beside it, and returns
// nodewatch's path.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodewatch-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "nodewatch")
		// With nodewatch_poison, freed objects are overwritten whole
		// (jsondoc.Free), so that a read of one shows in the output.
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-tags", "nodewatch_poison", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
			return
		}
		buildErr = os.Link(etcdPath, filepath.Join(dir, "nodewatch-etcd"))
	})
	if buildErr != nil {
		t.Fatalf("build nodewatch: %v", buildErr)
	}
	return binPath
}

// command returns an exec.Cmd for the binary with a clean environment
// and an empty HOME.
// The command is killed 2×timeout after this call (not counting the
// build).
func command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	// A home of its own: no run reads the files of the user running the
	// tests (metroctl's credentials).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	return cmd
}

// runCmd runs cmd and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("run %v: %v", cmd.Args, err)
	return -1, "", ""
}

// TestE2EExitCodes: what testdata/cli/exit-codes.txtar cannot check (it
// runs nodewatch in-process, and compares what it printed): the binary
// waits for --dial-timeout before it gives up, and ends with 130 on
// SIGINT and SIGTERM.
func TestE2EExitCodes(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/x/a", "1")

	for _, args := range [][]string{{"key", "/x", "--etcd"}, {"nodes", "--curator"}} {
		t.Run("3 not before --dial-timeout: "+args[0], func(t *testing.T) {
			dead, err := unusedAddr()
			if err != nil {
				t.Fatal(err)
			}
			// It cannot give up before --dial-timeout; how much later depends
			// on the machine's load: the message says which timeout it kept.
			cmd := command(t, append(args, dead, "--dial-timeout", "1s")...)
			start := time.Now()
			code, _, errOut := runCmd(t, cmd)
			elapsed := time.Since(start)
			if code != 3 || !strings.Contains(errOut, dead) || !strings.Contains(errOut, "within 1s") {
				t.Fatalf("exit %d, stderr %q; want 3 naming %s and the 1s", code, errOut, dead)
			}
			if elapsed < time.Second {
				t.Errorf("gave up after %v with --dial-timeout 1s", elapsed)
			}
		})
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run("130 "+sig.String(), func(t *testing.T) {
			cmd := command(t, "key", "--etcd", ep, "--prefix", "/x/")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(stdout)
			first, _ := r.ReadString('\n')
			second, _ := r.ReadString('\n')
			if !strings.Contains(second, "batch_done") {
				t.Fatalf("initial batch: %q %q", first, second)
			}
			cmd.Process.Signal(sig)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("after %v: %v, want exit 130", sig, err)
			}
		})
	}
}

// TestE2EAuthRefused: etcd refuses the credentials: a runtime failure,
// exit 1, with the password nowhere in the message.
func TestE2EAuthRefused(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	etcdtest.EnableAuth(t, c, "rootpw")
	code, _, errOut := runCmd(t, command(t, "key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--user", "root:s3cret-wrong"))
	if code != 1 || !strings.Contains(errOut, "authentication failed") {
		t.Fatalf("exit %d, stderr %q; want 1 and the reason", code, errOut)
	}
	if strings.Contains(errOut, "s3cret-wrong") {
		t.Fatalf("stderr leaks the password: %q", errOut)
	}
	cmd := command(t, "key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--user", "root", "--once")
	cmd.Env = append(cmd.Env, "NODEWATCH_PASSWORD=rootpw")
	if code, out, errOut := runCmd(t, cmd); code != 0 || !strings.Contains(out, "batch_done") {
		t.Fatalf("with the right password from NODEWATCH_PASSWORD: exit %d, %q, %q", code, out, errOut)
	}
}

// TestE2EPipes: a reader sees each batch at once, and `| head -n 1` ends
// nodewatch promptly although no further event comes.
func TestE2EPipes(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/p/a", "1")

	t.Run("reader sees the first batch before exit", func(t *testing.T) {
		cmd := command(t, "key", "--etcd", ep, "--prefix", "/p/")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }() // Wait: no process or goroutine left behind
		r := bufio.NewReader(stdout)
		for _, want := range []string{`"type":"new"`, `"type":"batch_done"`} {
			l, err := r.ReadString('\n')
			if err != nil || !strings.Contains(l, want) {
				t.Fatalf("line %q, %v; want %s", l, err, want)
			}
		}
		etcdtest.Put(t, c, "/p/b", "2")
		for _, want := range []string{`"id":"/p/b"`, `"type":"batch_done"`} {
			l, err := r.ReadString('\n')
			if err != nil || !strings.Contains(l, want) {
				t.Fatalf("line %q, %v; want %s", l, err, want)
			}
		}
	})

	t.Run("head -n 1", func(t *testing.T) {
		// pipefail: the pipeline's status is nodewatch's, not head's.
		cmd := exec.Command("bash", "-c", `set -o pipefail; "$0" key --etcd "$1" --prefix /p/ | head -n 1`, binary(t), ep)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.Contains(line, `"id":"/p/a"`) {
			t.Fatalf("first line %q, %v", line, err)
		}
		// No event comes after head's line: nodewatch can only end by
		// noticing that head has gone. How soon depends on the load.
		seen := time.Now()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("pipeline: %v; stderr %q", err, stderr.String())
			}
		case <-time.After(timeout):
			t.Fatal("nodewatch did not end after head exited")
		}
		t.Logf("pipeline ended %v after head's line", time.Since(seen))
		if stderr.Len() != 0 {
			t.Errorf("stderr not empty: %q", stderr.String())
		}
	})
}

func TestE2EChangesOnly(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/c/a", "1", "/c/b", "1")
	lines, stderr := startLines(t, command(t, "key", "--etcd", ep, "--prefix", "/c/", "--changes-only"))
	// nodewatch prints nothing while it builds the initial state, so
	// touch a sentinel key until a change shows: from then on, changes
	// come after the initial state. On a loaded machine the first touches
	// may land before the listing, so the sentinel's first line is `new`
	// or `updated`; either way, nothing of /c/a or /c/b comes before it.
	var got []string
	touches := 0
	testkit.Eventually(t, func() error {
		select {
		case l := <-lines:
			got = append(got, l)
			return nil
		default:
		}
		touches++
		etcdtest.Put(t, c, "/c/sync", strconv.Itoa(touches))
		return fmt.Errorf("no output at all; stderr %q", stderr.String())
	})
	etcdtest.Put(t, c, "/c/a", "2")
	etcdtest.Delete(t, c, "/c/b")
	deadline := time.After(timeout)
	for !strings.HasPrefix(got[len(got)-1], `{"type":"batch_done"`) || !strings.Contains(strings.Join(got, "\n"), `"id":"/c/b"`) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("nodewatch ended; stderr %q", stderr.String())
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("got %q; stderr %q", got, stderr.String())
		}
	}
	var mine []string // the lines about /c/a and /c/b, with their batch_done
	for i, l := range got {
		if strings.Contains(l, `"id":"/c/a"`) || strings.Contains(l, `"id":"/c/b"`) {
			mine = append(mine, l, got[i+1])
		}
	}
	first := strings.HasPrefix(got[0], `{"type":"new","id":"/c/sync"`) || strings.HasPrefix(got[0], `{"type":"updated","id":"/c/sync"`)
	if !first || len(got) < 2 || !strings.HasPrefix(got[1], `{"type":"batch_done","batch":1,`) {
		t.Fatalf("first lines %q; want the sentinel in batch 1, nothing of the initial state", got)
	}
	if len(mine) != 4 || !strings.HasPrefix(mine[0], `{"type":"updated","id":"/c/a"`) || !strings.HasPrefix(mine[2], `{"type":"deleted","id":"/c/b"`) {
		t.Fatalf("got %q; want the update of /c/a and the deletion of /c/b, each in its batch", got)
	}
}

// TestE2EText: -o text is coloured on a terminal, plain on a pipe and
// plain on a terminal with NO_COLOR.
func TestE2EText(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/t/a", `{"v":1}`)
	args := []string{"key", "--etcd", ep, "--prefix", "/t/", "--once", "-o", "text"}

	code, out, _ := runCmd(t, command(t, args...))
	if code != 0 || strings.Contains(out, "\x1b[") || !strings.Contains(out, ` new      /t/a  {"v":1}`) {
		t.Fatalf("pipe: exit %d, %q", code, out)
	}
	if got := onTerminal(t, command(t, args...)); !strings.Contains(got, "\x1b[32mnew     \x1b[0m /t/a") {
		t.Fatalf("terminal: no colour in %q", got)
	}
	cmd := command(t, args...)
	cmd.Env = append(cmd.Env, "NO_COLOR=1")
	if got := onTerminal(t, cmd); strings.Contains(got, "\x1b[") || !strings.Contains(got, "new      /t/a") {
		t.Fatalf("terminal with NO_COLOR: %q", got)
	}

	// A long value (a node record is about 900 characters) is cut to the
	// terminal's width (100 columns); to a pipe it stays whole.
	long := `{"text":"` + strings.Repeat("x", 900) + `"}`
	ep, _ = etcdtest.StartWith(t, "/t/long", long)
	args = []string{"key", "--etcd", ep, "/t/long", "--once", "-o", "text"}
	cmd = command(t, args...)
	cmd.Env = append(cmd.Env, "NO_COLOR=1")
	got := strings.Split(strings.ReplaceAll(onTerminal(t, cmd), "\r", ""), "\n")[0]
	if n := utf8.RuneCountInString(got); n != 100 || !strings.HasSuffix(got, "xxx…") {
		t.Fatalf("terminal: a line of %d characters, want 100 ending in …: %q", n, got)
	}
	if _, out, _ := runCmd(t, command(t, args...)); !strings.Contains(out, long) {
		t.Fatalf("pipe: the value is not whole: %q", out)
	}
}

// unusedAddr returns a loopback address nobody listens on.
func unusedAddr() (string, error) { return embedetcd.FreeAddr() }

// TestE2EEnvAndCompletion: connection flags come from the environment, and
// the completion scripts ask the binary for candidates.
func TestE2EEnvAndCompletion(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t, "/e/a", "1")

	cmd := command(t, "key", "/e/", "--prefix", "--once")
	cmd.Env = append(cmd.Env, "NODEWATCH_ETCD="+ep)
	if code, out, errOut := runCmd(t, cmd); code != 0 || !strings.Contains(out, `"id":"/e/a"`) {
		t.Fatalf("NODEWATCH_ETCD: exit %d, %q, %q", code, out, errOut)
	}
	dead, _ := unusedAddr()
	cmd = command(t, "nodes", "--dial-timeout", "500ms")
	cmd.Env = append(cmd.Env, "NODEWATCH_CURATOR="+dead)
	if code, _, errOut := runCmd(t, cmd); code != 3 || !strings.Contains(errOut, dead) {
		t.Fatalf("NODEWATCH_CURATOR: exit %d, %q; want 3 naming %s", code, errOut, dead)
	}

	// `nodewatch key --<TAB>` asks with a "--" on the line: it completes
	// flags and never starts a watch (with etcd reachable, one on a key
	// named --generate-bash-completion would never end).
	for _, sub := range []string{"key", "node"} {
		cmd := command(t, sub, "--", "--generate-bash-completion")
		cmd.Env = append(cmd.Env, "NODEWATCH_ETCD="+ep, "NODEWATCH_CURATOR="+ep)
		if code, out, errOut := runCmd(t, cmd); code != 0 || !strings.Contains(out, "--timeout\n") || strings.Contains(out, "batch_done") {
			t.Errorf("%s -- --generate-bash-completion: exit %d, %q, %q; want the flags", sub, code, out, errOut)
		}
	}

	code, out, _ := runCmd(t, command(t, "--generate-bash-completion"))
	for _, sub := range []string{"nodes", "node", "key", "serve", "sim", "completion"} {
		if code != 0 || !strings.Contains(out, sub+"\n") {
			t.Errorf("completion candidates %q lack %s", out, sub)
		}
	}
	if _, err := exec.LookPath("bash"); err == nil {
		_, script, _ := runCmd(t, command(t, "completion", "bash"))
		check := exec.Command("bash", "-n")
		check.Stdin = strings.NewReader(script)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("bash -n on the completion script: %v: %s", err, out)
		}
	}
}

// TestE2EVersion: `nodewatch version` names the build: the module
// version, the commit it was built from, and the Go version.
func TestE2EVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, command(t, "version"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasPrefix(lines[0], "nodewatch ") || lines[len(lines)-1] != runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("exit %d, %q, %q", code, out, errOut)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not in a git checkout (%v): no commit to check", err)
		return
	}
	if want := "commit " + strings.TrimSpace(string(head)); !strings.Contains(out, want) {
		t.Errorf("version %q does not name %s", out, want)
	}
}

// TestE2ERBAC: a user whose role covers one prefix can watch it; a key
// outside it is refused at once (exit 1), not retried for ever (nor taken
// for an unreachable etcd, exit 3).
func TestE2ERBAC(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/config/app", `{"v":1}`, "/secret/x", "s")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := c.RoleAdd(ctx, "config-reader"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "config-reader", "/config/", clientv3.GetPrefixRangeEnd("/config/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "ro", "ropw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "ro", "config-reader"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.EnableAuth(t, c, "rootpw")
	for _, args := range [][]string{{"/config/app"}, {"/config/", "--prefix"}} {
		cmd := command(t, append([]string{"key", "--etcd", ep, "--dial-timeout", "1m", "--user", "ro:ropw", "--once"}, args...)...)
		if code, out, errOut := runCmd(t, cmd); code != 0 || !strings.Contains(out, `"id":"/config/app"`) {
			t.Fatalf("key %v as ro: exit %d, %q, %q", args, code, out, errOut)
		}
	}
	code, _, errOut := runCmd(t, command(t, "key", "--etcd", ep, "--dial-timeout", "1m", "--user", "ro:ropw", "/secret/x"))
	if code != 1 || !strings.Contains(errOut, "permission denied") || strings.Contains(errOut, "ropw") {
		t.Fatalf("key outside the role: exit %d, stderr %q; want 1, permission denied, no password", code, errOut)
	}
}

// TestE2ESignalWhileBlocked: a reader that stops reading must not keep
// nodewatch alive: SIGINT ends it (130) although its write is blocked, and
// so does --timeout.
func TestE2ESignalWhileBlocked(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	ctx := context.Background()
	big := strings.Repeat("x", 8<<10)
	for i := 0; i < 100; i += 10 { // 800 KB of output: far more than a pipe holds
		var ops []clientv3.Op
		for j := i; j < i+10; j++ {
			ops = append(ops, clientv3.OpPut("/big/"+strconv.Itoa(j), big))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"key", "--etcd", ep, "--prefix", "/big/"}
	t.Run("SIGINT", func(t *testing.T) {
		code, wrote, stderr := blockedRun(t, args, syscall.SIGINT)
		if !wrote || code != 130 {
			t.Fatalf("exit %d (output written: %v), want 130; stderr %q", code, wrote, stderr)
		}
	})
	t.Run("--timeout", func(t *testing.T) {
		growing(t, func(d time.Duration) bool {
			code, wrote, stderr := blockedRun(t, append(args, "--once", "--timeout", d.String()), 0)
			if !wrote && notConnected(code, stderr) {
				return false
			}
			if !wrote || code != 124 {
				t.Fatalf("exit %d (output written: %v), want 124; stderr %q", code, wrote, stderr)
			}
			return true
		})
	})
}

// blockedRun runs nodewatch with args behind a reader that reads a little
// of its output (so nodewatch is surely writing), then stops reading and,
// unless sig is 0, sends it sig. It returns the exit code, whether the
// reader got its little (false: nodewatch ended first) and stderr.
func blockedRun(t *testing.T, args []string, sig syscall.Signal) (int, bool, string) {
	t.Helper()
	cmd := command(t, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stderr testkit.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, err = io.ReadFull(r, make([]byte, 1024))
	wrote := err == nil
	if wrote && sig != 0 {
		cmd.Process.Signal(sig)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, wrote, stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), wrote, stderr.String()
		}
		t.Fatalf("nodewatch: %v", err)
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatal("nodewatch stayed alive behind a reader that does not read")
	}
	return -1, false, ""
}

// TestE2EServeFailover: two `nodewatch serve` processes over one etcd, a
// `nodewatch nodes` process given both; the first serve is terminated, the
// fleet changes, and nodes carries on through the second, printing only
// differences.
func TestE2EServeFailover(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	var addrs []string
	var servers []*exec.Cmd
	for i := 0; i < 2; i++ {
		addr, _ := unusedAddr()
		srv := command(t, "serve", "--etcd", ep, "--listen", addr)
		stderr, _ := srv.StderrPipe()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
		// The first stderr line says it serves.
		if l, err := bufio.NewReader(stderr).ReadString('\n'); err != nil || !strings.Contains(l, "serving Curator Watch on "+addr) {
			t.Fatalf("serve %d: %q, %v", i, l, err)
		}
		addrs, servers = append(addrs, addr), append(servers, srv)
	}
	lines, stderr := startLines(t, command(t, "nodes", "--curator", strings.Join(addrs, ",")))
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("nodes ended; stderr %q", stderr.String())
			}
			return l
		case <-time.After(timeout):
			t.Fatalf("no line; stderr %q", stderr.String())
		}
		return ""
	}
	if l := next(); !strings.Contains(l, `"type":"new","id":"metropolis-`+idA) {
		t.Fatalf("first line %q", l)
	}
	next() // batch_done

	if err := servers[0].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	servers[0].Wait()
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_NEW, ""))
	var newB, resync int
	for newB == 0 {
		switch l := next(); {
		case strings.Contains(l, `"type":"new","id":"metropolis-`+idB):
			newB++
		case strings.Contains(l, `"cause":"resync"`):
			resync++
		case strings.Contains(l, idA):
			t.Fatalf("A printed again after the failover: %s", l)
		}
	}
	if resync > 1 {
		t.Errorf("%d resyncs, want at most 1", resync)
	}
}

// startLines starts cmd and returns its stdout, line by line (without
// newlines; the channel is closed at its end), and its stderr. The process
// is killed when the test ends.
func startLines(t *testing.T, cmd *exec.Cmd) (<-chan string, *testkit.Buffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		br := bufio.NewReader(stdout)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(l, "\n")
		}
	}()
	return lines, stderr
}
