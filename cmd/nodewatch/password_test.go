//go:build unix

package main

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestE2EPasswords: against an etcd with authentication on, the right
// password works from --user and from NODEWATCH_PASSWORD; a wrong one
// fails with a message that does not contain it; and whatever fails, no
// line of stdout or stderr contains the password, nor does --help with
// the password in NODEWATCH_USER.
func TestE2EPasswords(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	etcdtest.EnableAuth(t, c, "rootpw-s3cret")
	dead, err := unusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "wrong-pw-s3cret"
	for _, tc := range []struct {
		name   string
		args   []string
		env    []string
		code   int
		secret string // must be in no output line
		want   string // in stdout (code 0) or stderr
	}{
		{"right in --user", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--once", "--user", "root:rootpw-s3cret"}, nil, 0, "rootpw-s3cret", "batch_done"},
		{"right in NODEWATCH_PASSWORD", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--once", "--user", "root"}, []string{"NODEWATCH_PASSWORD=rootpw-s3cret"}, 0, "rootpw-s3cret", "batch_done"},
		{"right in NODEWATCH_USER", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--once"}, []string{"NODEWATCH_USER=root:rootpw-s3cret"}, 0, "rootpw-s3cret", "batch_done"},
		{"wrong in --user", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--user", "root:" + wrong}, nil, 1, wrong, "authentication failed, invalid user ID or password"},
		{"wrong in NODEWATCH_PASSWORD", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--user", "root"}, []string{"NODEWATCH_PASSWORD=" + wrong}, 1, wrong, "authentication failed"},
		{"wrong, serve", []string{"serve", "--etcd", ep, "--dial-timeout", "1m", "--listen", "127.0.0.1:0", "--user", "root:" + wrong}, nil, 1, wrong, "authentication failed"},
		{"unreachable", []string{"key", "--etcd", dead, "/x", "--dial-timeout", "1s", "--user", "root:" + wrong}, nil, 3, wrong, "no etcd reachable"},
		{"bad flag beside it", []string{"key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--user", "root:" + wrong, "--timeout", "soon"}, nil, 2, wrong, `invalid value "soon"`},
		{"--help", []string{"key", "--help"}, []string{"NODEWATCH_USER=root:" + wrong, "NODEWATCH_PASSWORD=" + wrong}, 0, wrong, "--user NAME[:PASSWORD]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := command(t, tc.args...)
			cmd.Env = append(cmd.Env, tc.env...)
			code, out, errOut := runCmd(t, cmd)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d and %q; stdout %q, stderr %q", code, tc.code, tc.want, out, errOut)
			}
			for _, l := range strings.Split(out+"\n"+errOut, "\n") {
				if strings.Contains(l, tc.secret) {
					t.Errorf("an output line holds the password: %q", l)
				}
			}
		})
	}
}

// TestE2EPasswordPrompt: --user NAME with no password asks for it on the
// terminal, which does not echo it; the right one connects, a wrong one
// fails without naming it.
func TestE2EPasswordPrompt(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	etcdtest.EnableAuth(t, c, "rootpw-typed")
	for _, tc := range []struct {
		typed string
		code  int
		want  string
	}{
		{"rootpw-typed", 0, "batch_done"},
		{"wrong-typed", 1, "authentication failed"},
	} {
		t.Run(tc.typed, func(t *testing.T) {
			t.Parallel()
			code, got := promptOnTerminal(t, command(t, "key", "--etcd", ep, "--dial-timeout", "1m", "/x", "--once", "--user", "root"), "nodewatch: password for etcd user root: ", tc.typed)
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d, want %d and %q; terminal %q", code, tc.code, tc.want, got)
			}
			if strings.Contains(got, tc.typed) {
				t.Fatalf("the password came back on the terminal: %q", got)
			}
		})
	}
}

// promptOnTerminal runs cmd with stdin, stdout and stderr on a new
// pseudo-terminal, waits for prompt, types answer and Enter, and returns
// the exit code and everything the terminal showed.
func promptOnTerminal(t *testing.T, cmd *exec.Cmd, prompt, answer string) (int, string) {
	t.Helper()
	ptm, pts := openPTY(t)
	defer ptm.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var shown strings.Builder
	r := bufio.NewReader(ptm)
	done := make(chan struct{})
	go func() { // read until the prompt, then type
		defer close(done)
		for !strings.HasSuffix(shown.String(), prompt) {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			shown.WriteByte(b)
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("no prompt %q within %v; terminal %q", prompt, timeout, shown.String())
	}
	if !strings.HasSuffix(shown.String(), prompt) {
		t.Fatalf("no prompt %q; terminal %q", prompt, shown.String())
	}
	if _, err := ptm.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	io.Copy(&shown, r) // until EIO, once the last writer is gone
	cmd.Wait()
	return cmd.ProcessState.ExitCode(), shown.String()
}
