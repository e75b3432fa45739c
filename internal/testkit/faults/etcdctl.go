//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Etcdctl is `etcdctl watch --prefix KeyPrefix -w json` against given
// endpoints, run beside nodewatch under the same faults so that their
// times to recover can be compared. etcdctl ends when the server cancels
// its watch (it watches WithRequireLeader: a member that lost its leader
// cancels it); Restart starts it again. Methods are safe across
// goroutines; Close must be called.
type Etcdctl struct {
	// Name says which one it is in logs.
	Name string

	bin  string
	args []string

	mu     sync.Mutex // guards everything below
	cmd    *exec.Cmd
	stderr *testkit.Buffer
	done   chan struct{} // closed when the current process ended and its stdout was read
	ended  bool          // the current process ended
	waits  lineWaits
}

// StartEtcdctl starts bin watching KeyPrefix on endpoints (comma-separated
// URLs).
func StartEtcdctl(name, bin, endpoints string) (*Etcdctl, error) {
	e := &Etcdctl{Name: name, bin: bin, args: []string{"--endpoints", endpoints, "watch", "--prefix", KeyPrefix, "-w", "json"}}
	return e, e.Restart()
}

// Restart starts the watch again if it ended (a no-op while it runs).
func (e *Etcdctl) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil && !e.ended {
		return nil
	}
	cmd := exec.Command(e.bin, e.args...)
	cmd.Env = []string{"ETCDCTL_API=3"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := newTail()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", e.Name, err)
	}
	done := make(chan struct{})
	e.cmd, e.stderr, e.done, e.ended = cmd, stderr, done, false
	go func() {
		defer close(done)
		br := bufio.NewReaderSize(out, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				e.mu.Lock()
				e.waits.line(line, time.Now())
				e.mu.Unlock()
			}
			if err != nil {
				break
			}
		}
		cmd.Wait()
		e.mu.Lock()
		e.ended = true
		e.mu.Unlock()
	}()
	return nil
}

// WaitValue returns a channel that receives the time etcdctl printed the
// first event that puts value.
func (e *Etcdctl) WaitValue(value []byte) <-chan time.Time {
	want := []byte(`"value":"` + base64.StdEncoding.EncodeToString(value) + `"`)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waits.add(func(line []byte) bool { return bytes.Contains(line, want) })
}

// Ended reports whether the current process ended, and the last line of
// its stderr.
func (e *Etcdctl) Ended() (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(e.stderr.String()), "\n")
	return e.ended, lines[len(lines)-1]
}

// Close kills the process and waits for it.
func (e *Etcdctl) Close() {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}
