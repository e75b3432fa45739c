//go:build unix

package render_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/render"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// The environment that makes the test binary a child of a test, re-run
// with -test.run=^TestChild$: what it is to do, and its arguments.
const (
	childEnv   = "NODEWATCH_RENDER_TEST_CHILD" // "kill" or "render"
	childTo    = "NODEWATCH_RENDER_TEST_TO"
	childFirst = "NODEWATCH_RENDER_TEST_FIRST" // kill: the first version
	childView  = "NODEWATCH_RENDER_TEST_VIEW"  // render: the content
)

// TestChild is what the child processes of TestKillWhileWriting and
// TestOwnerUnprivileged run; in a test run of its own it does nothing.
func TestChild(t *testing.T) {
	to := os.Getenv(childTo)
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("the child of other tests")
	case "kill":
		first, err := strconv.Atoi(os.Getenv(childFirst))
		if err != nil {
			t.Fatal(err)
		}
		renderVersions(t, to, first)
	case "render":
		r := &render.Renderer{
			Targets: []render.Target{{Program: program(t, "."), To: to}},
			Logf:    func(format string, args ...any) { fmt.Fprintf(os.Stderr, "warning: "+format+"\n", args...) },
		}
		renderOK(t, r, os.Getenv(childView))
	}
}

// child is a test's child process.
type child struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout's lines; closed at its end
	stderr *testkit.Buffer
}

// startChild starts the test binary, bin (os.Args[0] if ""), as a child
// that does what env says; it is killed when the test ends.
func startChild(t *testing.T, bin string, cred *syscall.Credential, env ...string) *child {
	t.Helper()
	if bin == "" {
		bin = os.Args[0]
	}
	c := &child{lines: make(chan string, 16), stderr: &testkit.Buffer{Max: 64 << 10}}
	c.cmd = exec.Command(bin, "-test.run=^TestChild$", "-test.timeout=5m")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = c.stderr
	if cred != nil {
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	go func() {
		defer close(c.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	return c
}

// waitFor waits for the child to print line.
func (c *child) waitFor(t *testing.T, line string) {
	t.Helper()
	timeout := time.NewTimer(testkit.Timeout)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.cmd.Wait()
				t.Fatalf("the child ended (%v) before it printed %q; its stderr:\n%s", c.cmd.ProcessState, line, c.stderr)
			}
			if l == line {
				return
			}
		case <-timeout.C:
			t.Fatalf("the child did not print %q within %v; its stderr:\n%s", line, testkit.Timeout, c.stderr)
		}
	}
}

// wait waits for the child to end, and fails the test unless it
// succeeded.
func (c *child) wait(t *testing.T) {
	t.Helper()
	var stdout []string
	for l := range c.lines {
		stdout = append(stdout, l)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the child: %v; its stdout:\n%s\nits stderr:\n%s", err, strings.Join(stdout, "\n"), c.stderr)
	}
}

// sleepCtx waits for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
