//go:build linux

package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Server is a `nodewatch serve` replica on a fixed address, which can be
// stopped (SIGTERM or SIGKILL) and started again on the same address. Its
// methods are called by one goroutine.
type Server struct {
	// Addr is where it listens, host:port.
	Addr string

	bin  string
	env  []string
	args []string
	cmd  *exec.Cmd // nil while stopped
	done chan struct{}
	err  *testkit.Buffer
}

// StartServer starts `bin serve --listen addr` plus args and waits until
// it serves.
func StartServer(bin string, env []string, addr string, args ...string) (*Server, error) {
	s := &Server{Addr: addr, bin: bin, env: env, args: args}
	return s, s.Start()
}

// Start starts the replica again (a no-op while it runs) and waits until
// it serves; an address still in use is tried again for up to a minute.
func (s *Server) Start() error {
	if s.cmd != nil {
		return nil
	}
	return testkit.Poll(context.Background(), time.Minute, func() (bool, error) {
		err := s.start()
		return err == nil || !strings.Contains(err.Error(), "address already in use"), err
	})
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, append([]string{"serve", "--listen", s.Addr}, s.args...)...)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.err = newTail()
	first := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stderr)
		l, _ := br.ReadString('\n')
		s.err.Write([]byte(l))
		first <- l
		io.Copy(s.err, br)
		cmd.Wait()
		close(done)
	}()
	select {
	case l := <-first:
		if !strings.Contains(l, "serving Curator Watch on") {
			<-done
			return fmt.Errorf("serve %s: %s", s.Addr, strings.TrimSpace(s.err.String()))
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("serve %s: not serving after a minute: %s", s.Addr, s.err.String())
	}
	s.cmd, s.done = cmd, done
	return nil
}

// Pid returns the process id of the running replica.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Running reports whether the replica runs.
func (s *Server) Running() bool { return s.cmd != nil }

// Stop sends sig (SIGTERM or SIGKILL) and waits until the process is gone.
func (s *Server) Stop(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	<-s.done
	s.cmd = nil
}

// Stderr returns the end of the replica's stderr.
func (s *Server) Stderr() string {
	if s.err == nil {
		return ""
	}
	return s.err.String()
}

// Close kills the replica.
func (s *Server) Close() { s.Stop(syscall.SIGKILL) }
