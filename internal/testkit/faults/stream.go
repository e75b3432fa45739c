//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// Stream is a nodewatch process (`key`, `nodes`, `node`) whose stdout is
// read line by line, each line applied to a replay.Checker. The reader
// can stop reading for a while (the pipe fills, nodewatch blocks on it)
// and the process can be stopped and continued. Methods are safe across
// goroutines; Close must be called.
type Stream struct {
	// Name says which stream it is in reports.
	Name string

	cmd    *exec.Cmd
	r      *os.File // read end of the stdout pipe
	stderr *testkit.Buffer
	done   chan struct{} // closed when the reader has seen the end and cmd.Wait returned
	gate

	mu        sync.Mutex // guards everything below
	check     replay.Checker
	violation error // the first line the Checker refused
	resyncs   int   // batch_done lines with cause "resync"
	closing   bool  // Close was called: the end is expected
	ended     bool
	waits     lineWaits
}

// StartStream starts bin with args (env as the environment), replaying
// its stdout; revs is replay.Checker.Revs (true for `key`).
func StartStream(name, bin string, env []string, revs bool, args ...string) (*Stream, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := &Stream{Name: name, r: r, stderr: newTail(), done: make(chan struct{})}
	s.check.Revs = revs
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = w, s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = s.cmd.Start()
	w.Close() // the child has its copy
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go s.read()
	return s, nil
}

// read applies every line of stdout to the Checker until the end.
func (s *Stream) read() {
	defer close(s.done)
	br := bufio.NewReaderSize(s.r, 64<<10)
	for {
		s.pass(nil)
		line, err := br.ReadBytes('\n')
		if err != nil {
			break
		}
		s.mu.Lock()
		if s.violation == nil {
			if err := s.check.Line(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
				s.violation = err
			}
		}
		if bytes.Contains(line, []byte(`"cause":"resync"`)) && isBatchDone(line) {
			s.resyncs++
		}
		s.waits.line(line, time.Now())
		s.mu.Unlock()
	}
	s.r.Close()
	s.cmd.Wait()
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

func isBatchDone(line []byte) bool {
	var ev struct{ Type string }
	json.Unmarshal(line, &ev)
	return ev.Type == "batch_done"
}

// WaitLine returns a channel that receives the time the reader read the
// first line, from now on, that match accepts (see Marker).
func (s *Stream) WaitLine(match func(line []byte) bool) <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waits.add(match)
}

// Equal compares the replayed state with want, as replay.Checker.Equal
// does; "" when equal.
func (s *Stream) Equal(want map[string]any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check.Equal(want)
}

// EqualValues is Equal for a `key` stream under the default --equals
// (.value): a key re-put with the value it had prints nothing, so the
// stream may hold an older object of the key with the same value (a
// write retried after a fault that had in fact been applied does that).
// Such an object counts as equal; anything else must be want's.
func (s *Stream) EqualValues(want map[string]any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	adjusted := make(map[string]any, len(want))
	for id, w := range want {
		adjusted[id] = w
		got, ok := s.check.Get(id)
		if !ok {
			continue
		}
		var wv any
		d := json.NewDecoder(bytes.NewReader(w.(json.RawMessage)))
		d.UseNumber()
		if d.Decode(&wv) != nil {
			continue
		}
		gm, _ := got.(map[string]any)
		wm, _ := wv.(map[string]any)
		if gm != nil && wm != nil && reflect.DeepEqual(gm["value"], wm["value"]) && reflect.DeepEqual(gm["key"], wm["key"]) {
			adjusted[id] = got
		}
	}
	return s.check.Equal(adjusted)
}

// State returns what the reader knows of the stream.
func (s *Stream) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{
		Synced:    s.check.Synced(),
		Events:    s.check.Events(),
		Resyncs:   s.resyncs,
		Violation: s.violation,
		Ended:     s.ended && !s.closing,
	}
}

// Pid returns the process id.
func (s *Stream) Pid() int { return s.cmd.Process.Pid }

// Stop sends SIGSTOP to the process; Cont continues it.
func (s *Stream) Stop() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Cont sends SIGCONT to the process.
func (s *Stream) Cont() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Buffered returns how many bytes wait in the stdout pipe, unread.
func (s *Stream) Buffered() int {
	n := -1
	rc, err := s.r.SyscallConn()
	if err != nil {
		return n
	}
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) // TIOCINQ is FIONREAD
	return n
}

// PipeSize returns how many bytes the stdout pipe holds (nodewatch grows
// it to console.PipeSize); 64 KiB if that cannot be read.
func (s *Stream) PipeSize() int {
	n := 64 << 10
	rc, err := s.r.SyscallConn()
	if err != nil {
		return n
	}
	rc.Control(func(fd uintptr) {
		if size, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil {
			n = size
		}
	})
	return n
}

// Stderr returns the end of the process's stderr.
func (s *Stream) Stderr() string { return s.stderr.String() }

// Close kills the process and waits for it and for the reader.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.ResumeReading()
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.done
}

// lineWaits are the waiters for a line that matches; the owner's mutex
// guards them.
type lineWaits []lineWait

type lineWait struct {
	match func([]byte) bool
	at    chan time.Time // buffered; receives once
}

func (w *lineWaits) add(match func([]byte) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	*w = append(*w, lineWait{match, ch})
	return ch
}

// line hands the time of line to every waiter it matches, which are done.
func (w *lineWaits) line(line []byte, at time.Time) {
	*w = slices.DeleteFunc(*w, func(lw lineWait) bool {
		if lw.match(line) {
			lw.at <- at
			return true
		}
		return false
	})
}
