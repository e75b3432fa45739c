//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestE2EQuickStart runs the README's Quick start commands as written,
// one at a time, with the built nodewatch and jq on PATH: serve --dev on
// the default address, the -o text stream until Ctrl-C (its initial
// batch: the five nodes it announces), the addresses through jq, and the
// --until wait, which holds at once: the dev fleet stays up.
func TestE2EQuickStart(t *testing.T) {
	t.Parallel()
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not installed (.ci/run installs it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:7835")
	if err != nil {
		t.Skipf("the default address is taken (%v): the Quick start needs it", err)
	}
	l.Close()
	blocks := readmeBlocks(t, "## Quick start", "sh")
	lines := strings.Split(strings.TrimSpace(blocks[0]), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "nodewatch serve --dev &") {
		t.Fatalf("the Quick start's first block is not what this test knows:\n%s", blocks[0])
	}
	// serve --dev killed leaves its etcd directory: in a TMPDIR of the test.
	env := []string{"PATH=" + filepath.Dir(binary(t)) + ":" + filepath.Dir(jq) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}
	serveOut, _ := startSnippet(t, lines[0]+"\nwait", env...)
	testkit.Eventually(t, func() error {
		if !strings.Contains(serveOut.String(), "serving Curator Watch") {
			return fmt.Errorf("serve --dev not serving yet: %s", serveOut)
		}
		return nil
	})

	// The streams, -o text and -o table (a row per change, not on a
	// terminal), until Ctrl-C (SIGINT to the process group, as a terminal
	// sends it).
	for _, c := range []struct {
		line, initial string
	}{
		{lines[1], "batch 1 (initial): 5 new, 0 updated, 0 deleted; synced"},
		{lines[2], "ID "},
	} {
		stream := exec.Command("bash", "-c", c.line)
		stream.Env = env
		stream.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out := &testkit.Buffer{}
		stream.Stdout, stream.Stderr = out, out
		if err := stream.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- stream.Wait() }()
		t.Cleanup(func() { syscall.Kill(-stream.Process.Pid, syscall.SIGKILL) })
		testkit.Eventually(t, func() error {
			if !strings.Contains(out.String(), c.initial) || strings.Count(out.String(), "metropolis-") < 5 {
				return fmt.Errorf("%s: not the five nodes yet:\n%s", c.line, out)
			}
			return nil
		})
		syscall.Kill(-stream.Process.Pid, syscall.SIGINT)
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("%s, Ctrl-C: %v, want exit 130\n%s", c.line, err, out)
			}
		case <-time.After(timeout):
			t.Fatalf("%s did not end on SIGINT:\n%s", c.line, out)
		}
	}

	// The addresses of the five nodes, through jq.
	addrs, ended := startSnippet(t, lines[3], env...)
	if err := <-ended; err != nil {
		t.Fatalf("%s: %v\n%s", lines[3], err, addrs)
	}
	if got := strings.Fields(addrs.String()); len(got) != 5 {
		t.Errorf("%s: %q, want 5 addresses", lines[3], got)
	}

	// The wait: met.
	waitOut, ended := startSnippet(t, lines[4], env...)
	if err := <-ended; err != nil {
		t.Fatalf("%s: %v\n%s", lines[4], err, waitOut)
	}
}
