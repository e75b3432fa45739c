//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestE2EServeDevEtcd: serve --dev runs its etcd as a child process,
// nodewatch-etcd, found beside nodewatch. A serve that is killed outright
// leaves no etcd behind, nor its temporary data; a serve whose etcd dies
// ends and says so; one that finds no nodewatch-etcd says where it looked
// and how to get it.
func TestE2EServeDevEtcd(t *testing.T) {
	t.Parallel()
	// startDev starts serve --dev with its temporary directories in tmp,
	// and returns it, its stderr so far and then on, and its etcd's pid.
	startDev := func(t *testing.T, tmp string) (*exec.Cmd, *testkit.Buffer, int) {
		addr, err := unusedAddr()
		if err != nil {
			t.Fatal(err)
		}
		srv := command(t, "serve", "--dev", "--listen", addr, "--dev-nodes", "3")
		srv.Env = append(srv.Env, "TMPDIR="+tmp)
		var stderr testkit.Buffer
		srv.Stderr = &stderr
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		testkit.Eventually(t, func() error {
			if !strings.Contains(stderr.String(), "serving Curator Watch on "+addr) {
				return fmt.Errorf("serve --dev not serving yet; stderr %q", stderr.String())
			}
			return nil
		})
		etcd := childNamed(t, srv.Process.Pid, "nodewatch-etcd")
		if etcd == 0 {
			t.Fatalf("serve --dev (pid %d) serves with no nodewatch-etcd child", srv.Process.Pid)
		}
		return srv, &stderr, etcd
	}
	t.Run("killed", func(t *testing.T) {
		tmp := t.TempDir()
		srv, _, etcd := startDev(t, tmp)
		srv.Process.Kill()
		srv.Wait()
		testkit.Eventually(t, func() error {
			if alive(etcd) {
				return fmt.Errorf("nodewatch-etcd (pid %d) still runs after its serve was killed", etcd)
			}
			return nil
		})
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Fatalf("serve --dev killed left %v in its temporary directory", left)
		}
	})
	t.Run("etcd dies", func(t *testing.T) {
		srv, stderr, etcd := startDev(t, t.TempDir())
		if err := syscall.Kill(etcd, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(stderr.String(), "nodewatch-etcd exited while serve ran") {
				t.Fatalf("serve ended with %v; stderr %q", err, stderr.String())
			}
		case <-time.After(timeout):
			t.Fatalf("serve --dev still runs %v after its etcd was killed; stderr %q", timeout, stderr.String())
		}
	})
	t.Run("missing", func(t *testing.T) {
		alone := filepath.Join(t.TempDir(), "nodewatch")
		if err := os.Link(binary(t), alone); err != nil {
			t.Fatal(err)
		}
		addr, err := unusedAddr()
		if err != nil {
			t.Fatal(err)
		}
		cmd := command(t, "serve", "--dev", "--listen", addr)
		cmd.Path, cmd.Args[0] = alone, alone
		cmd.Env = append(cmd.Env[1:], "PATH="+t.TempDir())
		code, _, stderr := runCmd(t, cmd)
		if code == 0 || !strings.Contains(stderr, "nodewatch-etcd not found beside nodewatch or in PATH") || !strings.Contains(stderr, "cmd/...") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}

// childNamed returns the pid of a child of pid whose command is name, or
// 0 if it has none.
func childNamed(t *testing.T, pid int, name string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, _, ppid, ok := procStat(child)
		if ok && ppid == pid && comm == name {
			return child
		}
	}
	return 0
}

// alive reports whether pid runs (a zombie, exited but not yet reaped by
// whoever inherited it, does not).
func alive(pid int) bool {
	_, state, _, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}

// procStat returns the command, the state and the parent of pid, from
// /proc.
func procStat(pid int) (comm, state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", 0, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", "", 0, false
	}
	fields := strings.Fields(s[close+1:]) // state, ppid, ...
	if len(fields) < 2 {
		return "", "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return s[open+1 : close], fields[0], ppid, err == nil
}
