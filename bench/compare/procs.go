//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// usage is what one process cost.
type usage struct {
	wall   time.Duration
	cpu    time.Duration // user + system
	maxRSS int64         // bytes
	// faults is the minor page faults of a follower (live rows): on
	// the 2-core development VM a page's first touch costs 10–19 µs
	// of CPU, so they are much of a start's CPU.
	faults int64
}

// finish waits for cmd and returns its usage; start is when it was started.
func finish(cmd *exec.Cmd, start time.Time) (usage, error) {
	err := cmd.Wait()
	u := usage{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			u.maxRSS = ru.Maxrss * 1024
			u.faults = ru.Minflt
		}
	}
	return u, err
}

// measure runs a command to its end with stdout to /dev/null and returns
// its usage; it fails if the command fails.
//
// The command runs under `compare measured`, a small process of its own:
// Linux hands a process the peak RSS of the one that exec'd it as the
// floor of its own (ru_maxrss is carried over exec), and this process
// holds the records it loaded.
func measure(name string, args ...string) (usage, error) {
	u, _, err := measureWith("", name, args...)
	return u, err
}

// measureWith is measure; how is "" (stdout to /dev/null) or "-pipe" (a
// pipe that `compare measured` drains, and then prints how many bytes
// came through it on its own stdout, which measureWith returns).
func measureWith(how, name string, args ...string) (usage, string, error) {
	self, err := os.Executable()
	if err != nil {
		return usage{}, "", err
	}
	margs := []string{"measured"}
	if how != "" {
		margs = append(margs, how)
	}
	cmd := exec.Command(self, append(append(margs, name), args...)...)
	var stdout, stderr strings.Builder
	if how == "" {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return usage{}, "", err
		}
		defer null.Close()
		cmd.Stdout = null
	} else {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return usage{}, "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	var u usage
	last := stderr.String()
	if i := strings.LastIndex(strings.TrimSuffix(last, "\n"), "\n"); i >= 0 {
		last = last[i+1:]
	}
	var wall, cpu int64
	if _, err := fmt.Sscanf(last, "measured: wall %d cpu %d maxrss %d", &wall, &cpu, &u.maxRSS); err != nil {
		return usage{}, "", fmt.Errorf("%s: no usage in %q", name, stderr.String())
	}
	u.wall, u.cpu = time.Duration(wall), time.Duration(cpu)
	return u, stdout.String(), nil
}

// measuredMain is `compare measured [-pipe] NAME ARGS...`: it runs the
// command, with this process's stdout (or, with -pipe, a pipe it drains,
// as the reader of a shell pipeline would, and then prints "piped N", the
// bytes that came through) and stderr, and prints its usage as the last
// line on stderr. The command's wall time ends when it has exited and
// its output is drained.
func measuredMain(name string, args []string) {
	piped := name == "-pipe"
	if piped {
		name, args = args[0], args[1:]
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	var out io.Reader
	if piped {
		var err error
		if out, err = cmd.StdoutPipe(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	} else {
		cmd.Stdout = os.Stdout
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var n int64
	if piped {
		n, _ = io.Copy(io.Discard, out) // to its end, before Wait closes the pipe
	}
	u, err := finish(cmd, start)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if piped {
		fmt.Printf("piped %d\n", n)
	}
	fmt.Fprintf(os.Stderr, "measured: wall %d cpu %d maxrss %d\n", u.wall, u.cpu, u.maxRSS)
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// etcdServer is an etcd process with its own data directory.
type etcdServer struct {
	cmd    *exec.Cmd
	URL    string
	dir    string
	client *clientv3.Client
}

func startEtcd(bin string) (*etcdServer, error) {
	dir, err := os.MkdirTemp("", "bench-etcd-")
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	curl, purl := fmt.Sprintf("http://127.0.0.1:%d", cport), fmt.Sprintf("http://127.0.0.1:%d", pport)
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "bench="+purl, "--quota-backend-bytes", strconv.Itoa(8<<30),
		"--log-level", "error",
		// The tools are measured, not the disk: without an fsync a put,
		// the load is made in a fraction of the time.
		"--unsafe-no-fsync")
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &etcdServer{cmd: cmd, URL: curl, dir: dir}
	e.client, err = clientv3.New(clientv3.Config{Endpoints: []string{curl}, DialTimeout: 10 * time.Second, MaxCallSendMsgSize: 64 << 20})
	if err != nil {
		e.stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := e.client.Get(ctx, "/ready"); err == nil {
			return e, nil
		} else if ctx.Err() != nil {
			e.stop()
			return nil, fmt.Errorf("etcd not ready: %v (log: %s.log)", err, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *etcdServer) stop() {
	if e.client != nil {
		e.client.Close()
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	e.cmd.Wait()
	os.RemoveAll(e.dir)
	os.Remove(e.dir + ".log")
}

// compact compacts etcd's history up to its current revision.
func (e *etcdServer) compact(ctx context.Context) error {
	resp, err := e.client.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	_, err = e.client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil // nothing written since the last compaction
	}
	return err
}

// watchers returns etcd's count of watchers.
func (e *etcdServer) watchers() (int, error) { return metricsWatchers(e.URL) }

// metricsWatchers returns etcd_debugging_mvcc_watcher_total from the
// metrics of the etcd at url.
func metricsWatchers(url string) (int, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^etcd_debugging_mvcc_watcher_total (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no etcd_debugging_mvcc_watcher_total in /metrics")
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	return int(f), err
}

// follower is a long-running process whose stdout the harness scans for
// markers: substrings it waits for.
type follower struct {
	name  string
	cmd   *exec.Cmd
	start time.Time

	mu      sync.Mutex
	cond    *sync.Cond
	lines   int
	counts  map[string]int // marker → lines containing it
	onLine  func(line []byte, at time.Time)
	done    bool
	stderr  strings.Builder
	readErr error
}

// startFollower starts name with args; markers are the substrings counted
// in its output; onLine (if set) sees every line as it arrives.
func startFollower(label string, markers []string, onLine func([]byte, time.Time), name string, args ...string) (*follower, error) {
	return startFollowerEnv(label, nil, markers, onLine, name, args...)
}

// startFollowerEnv is startFollower with env (NAME=VALUE) added to this
// process's environment.
func startFollowerEnv(label string, env []string, markers []string, onLine func([]byte, time.Time), name string, args ...string) (*follower, error) {
	f := &follower{name: label, cmd: exec.Command(name, args...), counts: map[string]int{}, onLine: onLine}
	if len(env) > 0 {
		f.cmd.Env = append(os.Environ(), env...)
	}
	f.cond = sync.NewCond(&f.mu)
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	f.cmd.Stderr = &lockedWriter{mu: &f.mu, w: &f.stderr}
	f.start = time.Now()
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if f.onLine != nil {
				f.onLine(line, time.Now())
			}
			f.mu.Lock()
			f.lines++
			for _, m := range markers {
				if strings.Contains(string(line), m) {
					f.counts[m]++
				}
			}
			f.cond.Broadcast()
			f.mu.Unlock()
		}
		f.mu.Lock()
		f.done, f.readErr = true, sc.Err()
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	return f, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stderrText returns what the process wrote to stderr so far.
func (f *follower) stderrText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stderr.String()
}

// count returns how many lines held marker so far.
func (f *follower) count(marker string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[marker]
}

// waitFor waits until a line held marker, or fails after d.
func (f *follower) waitFor(marker string, d time.Duration) error {
	t := time.AfterFunc(d, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(d)
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.counts[marker] == 0 {
		if f.done || time.Now().After(deadline) {
			return fmt.Errorf("%s: no line with %q after %v (%d lines; stderr %q)", f.name, marker, d, f.lines, f.stderr.String())
		}
		f.cond.Wait()
	}
	return nil
}

// stop interrupts the process and returns its usage. A process still
// running stopWait after the interrupt is killed, and said so on stderr:
// once, a run of the live rows waited for ever on an etcdctl watch that
// did not end on SIGINT.
func (f *follower) stop() (usage, error) {
	// Its peak RSS is read before it ends: ru_maxrss would be at least
	// this process's own, carried over the exec (see measuredMain).
	peak, hwmErr := hwm(f.cmd.Process.Pid)
	f.cmd.Process.Signal(syscall.SIGINT)
	kill := time.AfterFunc(stopWait, func() {
		fmt.Fprintf(os.Stderr, "%s: still running %v after SIGINT; killed\n", f.name, stopWait)
		f.cmd.Process.Kill()
	})
	u, err := finish(f.cmd, f.start)
	kill.Stop()
	u.maxRSS = peak
	if err == nil && hwmErr != nil {
		err = hwmErr
	}
	if err != nil {
		var ee *exec.ExitError
		if asExit(err, &ee) && (ee.ExitCode() == 130 || ee.ExitCode() == -1 || ee.ExitCode() == 0) {
			err = nil // interrupted, as asked
		}
	}
	return u, err
}

// stopWait is how long stop waits for a process to end on SIGINT.
const stopWait = 30 * time.Second

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// hwm returns the peak resident memory of a running process (VmHWM).
func hwm(pid int) (int64, error) { return procBytes(pid, "VmHWM") }

// procBytes returns a memory figure of a running process from
// /proc/PID/status (VmRSS, VmHWM, …), in bytes.
func procBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no %s for pid %d", field, pid)
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	return kb * 1024, err
}

// procCPU returns the CPU time (user + system) a running process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th, in clock ticks
	// (USER_HZ, 100 on Linux).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}

// selfCPU returns the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeak resets the peak resident memory (VmHWM) of a running process
// to its RSS now (Linux's clear_refs), so that a later VmHWM is the peak
// of what happened in between.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
