package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EServeDevEtcd: serve --dev runs its etcd as a child process,
// nodewatch-etcd, found beside nodewatch; a serve that is killed outright
// leaves no etcd behind, and one that finds no nodewatch-etcd says where
// it looked and how to get it.
func TestE2EServeDevEtcd(t *testing.T) {
	t.Parallel()
	t.Run("killed", func(t *testing.T) {
		addr, err := unusedAddr()
		if err != nil {
			t.Fatal(err)
		}
		srv := command(t, "serve", "--dev", "--listen", addr, "--dev-nodes", "3")
		stderr, _ := srv.StderrPipe()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		lines := bufio.NewScanner(stderr)
		for lines.Scan() && !strings.Contains(lines.Text(), "serving Curator Watch on "+addr) {
		}
		go io.Copy(io.Discard, stderr)
		etcd := childNamed(t, srv.Process.Pid, "nodewatch-etcd")
		if etcd == 0 {
			t.Fatalf("serve --dev (pid %d) serves with no nodewatch-etcd child", srv.Process.Pid)
		}
		srv.Process.Kill()
		srv.Wait()
		deadline := time.Now().Add(timeout)
		for alive(etcd) {
			if time.Now().After(deadline) {
				t.Fatalf("nodewatch-etcd (pid %d) still runs %v after its serve was killed", etcd, timeout)
			}
			time.Sleep(10 * time.Millisecond)
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
		comm, ppid, ok := procStat(child)
		if ok && ppid == pid && comm == name {
			return child
		}
	}
	return 0
}

// alive reports whether pid runs (a zombie, exited but not yet reaped by
// whoever inherited it, does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X") && syscall.Kill(pid, 0) == nil
}

// procStat returns the command and the parent of pid, from /proc.
func procStat(pid int) (comm string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", 0, false
	}
	fields := strings.Fields(s[close+1:]) // state, ppid, ...
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return s[open+1 : close], ppid, err == nil
}
