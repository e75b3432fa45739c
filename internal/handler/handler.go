// Package handler runs the command of --exec: once per delivered batch,
// with the batch's NDJSON lines on its stdin and the batch described in
// its environment, in a process group of its own, so that a timeout or a
// signal reaches everything it started. --render's --check and --reload
// are run the same way (RunEnv), with their own environment.
package handler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// DefaultGrace is how long a handler may take to end after SIGTERM (or
// the signal nodewatch got) before it is killed.
const DefaultGrace = 5 * time.Second

// Handler is the command of --exec.
type Handler struct {
	// Command is run as `/bin/sh -c Command` (on Windows, `cmd.exe /d /s
	// /c "Command"`).
	Command string
	// Args are Command's positional parameters, $1 on: `/bin/sh -c
	// Command sh Args…`. cmd.exe has none, and on Windows they are not
	// passed: say what the command needs in its environment as well.
	Args []string
	// Timeout > 0 ends a run that takes longer: its process group gets
	// SIGTERM, then, Grace later, SIGKILL.
	Timeout time.Duration
	// Grace: see DefaultGrace; 0 means the default.
	Grace time.Duration
	// Stdout and Stderr receive the handler's; nil discards them.
	Stdout, Stderr io.Writer
	// ChangeEnv, if set, describes a batch of exactly one change (one
	// new, updated or deleted) in more variables (key: etcdctl's).
	ChangeEnv ChangeEnv
}

// A ChangeEnv describes the one change of a batch to its handler, in
// variables of its own. It is called from the goroutine that runs the
// handler.
type ChangeEnv interface {
	// Vars names the variables that Env sets. No run inherits them from
	// nodewatch's environment: a batch of several changes has none.
	Vars() []string
	// Env returns NAME=VALUE for each variable, for the change on line,
	// the batch's NDJSON line of it; nil if the line does not say.
	Env(line []byte) []string
}

// Signal is the cause of a context that a signal ended (main sets it),
// so that the signal can be passed on to a running handler.
type Signal struct{ os.Signal }

func (s Signal) Error() string { return s.Signal.String() + " signal received" }

// Run runs the handler once for the batch that done ends, with input on
// its stdin; attempt counts the runs for this batch from 1. It returns nil
// when the handler exits 0. When ctx ends first, the handler gets the
// signal that ended it (SIGTERM for anything else), then, Grace later,
// SIGKILL, and Run returns ctx.Err() once it is gone.
func (h *Handler) Run(ctx context.Context, input []byte, done flow.Event, attempt int) error {
	env := append(os.Environ(), Env(done, attempt)...)
	if h.ChangeEnv != nil {
		env = changeEnv(env, h.ChangeEnv, input, done)
	}
	return h.run(ctx, input, env)
}

// RunEnv is Run for a command that is not a batch's handler (--render's
// --check and --reload): env, in place of a batch's, is added to the
// inherited environment.
func (h *Handler) RunEnv(ctx context.Context, input []byte, env []string) error {
	return h.run(ctx, input, append(os.Environ(), env...))
}

// run runs the command with input on its stdin and env its whole
// environment.
func (h *Handler) run(ctx context.Context, input []byte, env []string) error {
	cmd := shell(h.Command, h.Args)
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stdout, cmd.Stderr = h.Stdout, h.Stderr
	cmd.Env = env
	ownGroup(cmd)
	// A child that the handler left running may hold its stdout: the run
	// ends with the handler, not with it.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if h.Timeout > 0 {
		t := time.NewTimer(h.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-exited:
		if errors.Is(err, exec.ErrWaitDelay) {
			// It exited 0; a child it left holds its stdout or stderr.
			return nil
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return fmt.Errorf("killed by %v", ws.Signal())
			}
			return fmt.Errorf("exit status %d", ee.ExitCode())
		}
		return err
	case <-timeout:
		h.end(cmd.Process, syscall.SIGTERM, exited)
		return fmt.Errorf("timed out after %v (--exec-timeout)", h.Timeout)
	case <-ctx.Done():
		sig := syscall.SIGTERM
		var s Signal
		if errors.As(context.Cause(ctx), &s) {
			if ss, ok := s.Signal.(syscall.Signal); ok {
				sig = ss
			}
		}
		h.end(cmd.Process, sig, exited)
		return ctx.Err()
	}
}

// end sends sig to the process group of p, and SIGKILL once Grace has
// passed, until the handler has exited.
func (h *Handler) end(p *os.Process, sig syscall.Signal, exited <-chan error) {
	signalGroup(p, sig)
	grace := h.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		signalGroup(p, syscall.SIGKILL)
		<-exited
	}
	// What the handler started and left behind ends with it.
	signalGroup(p, syscall.SIGKILL)
}

// changeEnv returns env without the variables of ce, and with them when
// the batch that done ends, whose lines are input, holds one change (its
// first line).
func changeEnv(env []string, ce ChangeEnv, input []byte, done flow.Event) []string {
	vars := ce.Vars()
	env = slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(vars, name)
	})
	if c := done.Counts; c.New+c.Updated+c.Deleted != 1 {
		return env
	}
	line, _, _ := bytes.Cut(input, []byte("\n"))
	return append(env, ce.Env(line)...)
}

// Env is the environment that describes a batch to its handler, beside
// the inherited one.
func Env(done flow.Event, attempt int) []string {
	return []string{
		"NODEWATCH_BATCH=" + strconv.Itoa(done.Batch),
		"NODEWATCH_CAUSE=" + done.Cause.String(),
		"NODEWATCH_SYNCED=" + strconv.FormatBool(done.Synced),
		"NODEWATCH_REV=" + strconv.FormatInt(done.Rev, 10),
		"NODEWATCH_NEW=" + strconv.Itoa(done.Counts.New),
		"NODEWATCH_UPDATED=" + strconv.Itoa(done.Counts.Updated),
		"NODEWATCH_DELETED=" + strconv.Itoa(done.Counts.Deleted),
		"NODEWATCH_ATTEMPT=" + strconv.Itoa(attempt),
	}
}
