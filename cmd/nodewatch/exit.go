package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/watch"
)

// Exit codes. exitTable says when each is used, for --help; exitCode is
// the one place that maps errors to them.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = cmdline.ExitUsage
	exitUnavailable = 3
	exitFailIf      = 4
	exitTimeout     = 124
	exitInterrupted = 130
)

// exitRow is one exit code and what it means to each kind of command, as
// their --help says it ("" where the code is not used). brief is the
// watching commands' meaning in the man page's DESCRIPTION.
type exitRow struct {
	code                            int
	watch, serve, sim, plain, brief string
}

// exitTable is the EXIT CODES of every command's --help, and of the man
// page.
func exitTable() []exitRow {
	return []exitRow{
		{exitOK, "goal met (--once, --until, --each, --count); --timeout passed with no goal set; stdout closed",
			"stopped by SIGINT or SIGTERM and drained (the normal end)", "--duration or --steps reached", "done",
			"goal met (--once, --until, --each, --count), --timeout passed with no goal set, or stdout closed"},
		{exitFailure, "runtime failure: refused by the server, or it is not etcd / not a Curator; --strict jq error; output error",
			"runtime failure: cannot listen, refused by etcd (or not etcd)", "runtime failure: refused by etcd (or not etcd)", "",
			"runtime failure"},
		{exitUsage, "usage: bad flag, argument or jq expression; unreadable TLS file",
			"usage: bad flag; unreadable or mismatched TLS file; plaintext on a non-loopback address without --insecure",
			"usage: bad flag", "usage: bad argument",
			"usage error (bad flag, argument or jq expression)"},
		{exitUnavailable, "no connection within --dial-timeout, or --timeout passed before the initial state",
			"etcd not reached within --dial-timeout", "etcd not reached within --dial-timeout", "",
			"no connection within --dial-timeout"},
		{exitFailIf, "a failure condition was met: an object satisfied --fail-if (the report names it)", "", "", "",
			"a failure condition was met (--fail-if)"},
		{exitTimeout, "--timeout passed with the goal unmet", "", "", "", "--timeout passed with the goal unmet"},
		{exitInterrupted, "interrupted (SIGINT, SIGTERM)", "a second SIGINT or SIGTERM during the drain",
			"interrupted (SIGINT, SIGTERM)", "", "interrupted"},
	}
}

// meaning is what r's code means to command ("" where it has no EXIT
// CODES section).
func (r exitRow) meaning(command string) string {
	switch command {
	case "nodes", "node", "key":
		return r.watch
	case "serve":
		return r.serve
	case "sim":
		return r.sim
	case "completion", "version":
		return r.plain
	}
	return ""
}

// exitCodesRows returns the EXIT CODES of command's --help: each code it
// uses and what it means; none when it has no such section.
func exitCodesRows(command string) [][2]string {
	var rows [][2]string
	for _, r := range exitTable() {
		if m := r.meaning(command); m != "" {
			rows = append(rows, [2]string{strconv.Itoa(r.code), m})
		}
	}
	return rows
}

// exitCodesBrief is the exit codes in one paragraph, for the man page.
func exitCodesBrief() string {
	var parts []string
	for _, r := range exitTable() {
		parts = append(parts, strconv.Itoa(r.code)+" "+r.brief)
	}
	return wrap("Exit codes of the watching commands (nodes, node, key): "+strings.Join(parts, "; ")+
		". sim ends with 130 when stopped by a signal; serve drains and ends with 0 (130 on a second signal). "+
		"Each command's --help lists its own.", 89)
}

// exitStatus is the exit codes of every command, for the man page: each
// code with what it means to each kind of command.
func exitStatus() string {
	var b strings.Builder
	for _, r := range exitTable() {
		for _, k := range []struct{ who, what string }{{"nodes, node, key", r.watch}, {"serve", r.serve}, {"sim", r.sim}, {"completion, version", r.plain}} {
			if k.what != "" {
				fmt.Fprintf(&b, "%d (%s)\n   %s\n", r.code, k.who, k.what)
			}
		}
	}
	return b.String()
}

// wrap breaks text into lines of at most width bytes, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(text) {
		switch {
		case line == 0:
		case line+1+len(w) > width:
			b.WriteByte('\n')
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// stopError turns how a watch ended into the command's result; target
// names what was watched ("etcd at …"), timeout is --timeout, goal
// describes the goal that was set.
func stopError(res watch.Result, err error, target string, timeout time.Duration, goal string) error {
	switch res.Stop {
	case watch.GoalMet, watch.OutputClosed:
		return nil
	case watch.Interrupted:
		return context.Canceled
	case watch.FailConditionMet:
		return &cmdline.Error{Code: exitFailIf, Err: fmt.Errorf("--fail-if was met by %s", tripped(res.Report))}
	case watch.TimedOut:
		switch {
		case !res.Received:
			// Never connected: that is "unavailable", whatever the goal.
			return &cmdline.Error{Code: exitUnavailable, Err: fmt.Errorf("no connection to %s within --timeout %v", target, timeout)}
		case res.GoalUnmet:
			return &cmdline.Error{Code: exitTimeout, Err: fmt.Errorf("timed out before %s", goal)}
		}
		return nil
	}
	return err
}

// tripped names the objects of rep that met --fail-if.
func tripped(rep *watch.Report) string {
	var ids []string
	for _, u := range rep.Tripped {
		ids = append(ids, u.ID)
	}
	s := strings.Join(ids, ", ")
	if n := rep.MoreTripped; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// exitCode returns the exit code for err and whether err deserves a
// message on stderr.
func exitCode(err error) (code int, report bool) {
	var own *cmdline.Error
	switch {
	case err == nil, errors.Is(err, cmdline.ErrHelpShown):
		return exitOK, false
	case errors.As(err, &own):
		return own.Code, true
	case errors.Is(err, dial.ErrUnavailable):
		return exitUnavailable, true
	case errors.Is(err, context.Canceled): // SIGINT, SIGTERM
		return exitInterrupted, false
	case stream.IsClosedPipe(err):
		// The reader went away (| head -1): ending quietly is the point.
		return exitOK, false
	}
	return exitFailure, true
}
