// Package watchflags is the command line of a watch: the flags every
// watching command (key, nodes, node) shares — what to print and how,
// when to stop, what to run instead of printing, where to record and
// resume — and their parsing into watch.Options, checked before anything
// connects. It exists so that the commands share one table and one
// parser, as connflags is theirs for connections. Every error of parsing
// is a usage error (cmdline.Usagef) that names the flag.
package watchflags

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/console"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handler"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/render"
	"github.com/nodewatch/nodewatch/internal/state"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/watch"
)

// Flags are the flags every watching command shares: what to print, how,
// and when to stop.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "filter", Usage: "jq `EXPR`: print only objects for which it is true"},
		&cli.StringFlag{Name: "equals", Usage: "jq `EXPR`: two states are equal (no `updated`) when it gives the same outputs for both"},
		&cli.StringFlag{Name: "until", Usage: "jq `EXPR` over the current view: exit 0 after the batch where it becomes true"},
		&cli.StringFlag{Name: "each", Usage: "jq `EXPR` over each object: exit 0 once every object (at least one) satisfies it"},
		&cli.IntFlag{Name: "at-least", Usage: "with --each: exit 0 once at least `N` objects satisfy it (not necessarily all)"},
		&cli.StringFlag{Name: "fail-if", Usage: "jq `EXPR` over each object: exit 4 as soon as any object satisfies it, naming it (a failure condition)"},
		&cli.DurationFlag{Name: "stable", Usage: "with --until or --each: the goal must hold for `D` without a break before exit 0; a change that breaks it starts the clock again", DefaultText: "none"},
		&cli.StringFlag{Name: "report", Usage: "when the run ends without its goal, also write the report as JSON to `FILE`", TakesFile: true},
		&cli.StringSliceFlag{Name: "arg", Usage: "bind $NAME to the string VALUE in every expression, as jq's --arg `NAME VALUE`"},
		&cli.StringSliceFlag{Name: "argjson", Usage: "bind $NAME to the JSON text in every expression, as jq's --argjson `NAME JSON`"},
		&cli.BoolFlag{Name: "strict", Usage: "a jq evaluation error ends the run (exit 1) instead of a warning"},
		&cli.BoolFlag{Name: "once", Usage: "print the initial state, then exit 0"},
		&cli.IntFlag{Name: "count", Usage: "exit 0 after `N` new/updated/deleted events"},
		&cli.DurationFlag{Name: "timeout", Usage: "end the run after `D`; exit 124 if --once/--until/--each/--count was not met"},
		&cli.BoolFlag{Name: "changes-only", Usage: "build the initial state silently; print only later changes"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "`FORMAT`: json (NDJSON), pretty (indented JSON), text (one human line per event) or table (a row per object: redrawn in place on a terminal, a row per change elsewhere)"},
		columnsFlag(),
		&cli.StringFlag{Name: "color", Value: "auto", Usage: "colour -o text's events and -o table's changed cells: `WHEN` is auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never"},
		&cli.BoolFlag{Name: "timestamps", Usage: "add \"ts\" (RFC 3339, UTC) to every line"},
		&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second, Usage: "exit 3 when no connection is made within `D`"},
		&cli.StringFlag{Name: "exec", Usage: "instead of printing, run `CMD` (/bin/sh -c CMD) once per batch: the batch's NDJSON lines on its stdin, NODEWATCH_* describing it; one run at a time, later batches merge meanwhile"},
		&cli.StringFlag{Name: "settle", Usage: "with --exec or --render: deliver once no change came for MIN, or MAX after the first undelivered change, whichever is first (`MIN[:MAX]`; MAX is 4 times MIN if left out)"},
		&cli.IntFlag{Name: "exec-retries", Value: 5, Usage: "retry a failed handler `N` times (with backoff, given what merged meanwhile) before exiting 1"},
		&cli.DurationFlag{Name: "exec-timeout", Usage: "end a handler run (its process group: TERM, then KILL 5s later) that takes longer than `D`", DefaultText: "none"},
		&cli.StringFlag{Name: "state", Usage: "record what was delivered in `FILE` and resume from it: the first batch holds what changed since, and again what a killed run may have delivered (cause \"resume\")", TakesFile: true},
		&cli.DurationFlag{Name: "heartbeat", Usage: "when nothing was printed for `D`, print {\"type\":\"heartbeat\",…} if the source just confirmed it is current (etcd: at rev N; Curator: the connection)"},
	}, renderFlags()...)
}

// Options are the parsed Flags: the run's options, and what the command
// around the run takes from the flags or adds.
type Options struct {
	watch.Options
	// DialTimeout is --dial-timeout, for the command's source.
	DialTimeout time.Duration
	// Handler runs --exec's command; nil when the run prints.
	Handler *handler.Handler
	// Renderer keeps --render's files; nil without --render.
	Renderer *render.Renderer
	// Target names what is watched in messages, e.g. "curator at a,b";
	// What the object of a one-object watch ("node metropolis-…"). The
	// command sets both.
	Target, What string
	// AllProcs: the run uses every P, not one (watch.Options.OneProc):
	// nodes --once, whose listing is converted on every P. The command
	// sets it.
	AllProcs bool
	// Follows says what a --state file follows: the command puts its
	// fields before the expressions' that Parse sets.
	Follows []state.Field

	// Color is --color: the command decides with it whether -o text is
	// coloured, once it knows whether stdout is a terminal.
	Color console.Color

	reportFile string // --report
	asked      string // the goal as the flags gave it, for --report
	stateFile  string // --state
}

// Parse reads Flags from c. equalsField, when --equals is not given, is
// the member of the objects whose bytes decide whether two states are the
// same ("" compares whole objects; see watch.Options.EqualsField);
// alsoFilter, a jq expression the command adds to the user's --filter
// ("" for none), must hold too.
func Parse(c *cli.Context, equalsField, alsoFilter string) (*Options, error) {
	o := &Options{Options: watch.Options{
		Strict: c.Bool("strict"), Once: c.Bool("once"), Count: c.Int("count"), Timeout: c.Duration("timeout"),
		ChangesOnly: c.Bool("changes-only"), Heartbeat: c.Duration("heartbeat"),
	}, DialTimeout: c.Duration("dial-timeout")}
	o.Output.Timestamps = c.Bool("timestamps")
	if o.Heartbeat < 0 || (c.IsSet("heartbeat") && o.Heartbeat < 100*time.Millisecond) {
		return nil, cmdline.Usagef("--heartbeat: must be at least 100ms, got %v", o.Heartbeat)
	}
	var err error
	if o.Output.Format, err = stream.ParseFormat(c.String("output")); err != nil {
		return nil, cmdline.Usagef("--output: %v", err)
	}
	if o.Color, err = console.ParseColor(c.String("color")); err != nil {
		return nil, cmdline.Usagef("--color: %v", err)
	}
	if o.Count < 0 {
		return nil, cmdline.Usagef("--count: must not be negative, got %d", o.Count)
	}
	o.AtLeast, o.reportFile = c.Int("at-least"), c.String("report")
	o.AlwaysReport, o.asked = o.reportFile != "", asked(c)
	if o.reportFile != "" {
		// Found unwritable at the end, it would take the exit code the
		// wait earned: try its directory now.
		f, err := os.CreateTemp(filepath.Dir(o.reportFile), ".nodewatch-report-*")
		if err != nil {
			return nil, cmdline.Usagef("--report %s: cannot write there: %v", o.reportFile, errors.Unwrap(err))
		}
		f.Close()
		os.Remove(f.Name())
	}
	switch {
	case c.IsSet("at-least") && c.String("each") == "":
		return nil, cmdline.Usagef("--at-least: only with --each")
	case o.AtLeast < 0 || c.IsSet("at-least") && o.AtLeast == 0:
		return nil, cmdline.Usagef("--at-least: must be at least 1, got %d", o.AtLeast)
	}
	if o.Timeout < 0 || o.DialTimeout <= 0 {
		return nil, cmdline.Usagef("--timeout and --dial-timeout must be positive")
	}
	if err := o.parseExec(c); err != nil {
		return nil, err
	}
	if err := o.parseTiming(c); err != nil {
		return nil, err
	}
	o.stateFile = c.String("state")
	if c.IsSet("state") && o.stateFile == "" {
		return nil, cmdline.Usagef("--state: want a FILE")
	}
	vars, err := cmdline.JQVars(c)
	if err != nil {
		return nil, cmdline.Usage(err)
	}
	if err := o.parseRender(c, vars); err != nil {
		return nil, err
	}
	equals, follows := c.String("equals"), c.String("equals")
	if !c.IsSet("equals") {
		o.EqualsField = equalsField
		if equalsField != "" {
			follows = "." + equalsField // what the default was called
		}
	}
	o.Follows = []state.Field{
		{Name: "--filter", Value: c.String("filter")}, {Name: "--equals", Value: follows},
		{Name: "--arg", Value: strings.Join(c.StringSlice("arg"), " ")}, {Name: "--argjson", Value: strings.Join(c.StringSlice("argjson"), " ")},
	}
	for _, p := range []struct {
		flag, expr string
		dst        **jq.Program
	}{{"--filter", c.String("filter"), &o.Filter}, {"--equals", equals, &o.Equals}, {"--until", c.String("until"), &o.Until}, {"--each", c.String("each"), &o.Each},
		{"--fail-if", c.String("fail-if"), &o.FailIf}} {
		if p.expr == "" {
			continue
		}
		prog, err := jq.Compile(p.flag, p.expr, vars)
		if err != nil {
			return nil, cmdline.Usage(err)
		}
		*p.dst = prog
	}
	if alsoFilter != "" {
		expr := alsoFilter
		if user := c.String("filter"); user != "" {
			// The user's expression compiled alone above: errors name its
			// own positions. The command's comes first, so that objects it
			// excludes never reach the user's (which may expect its
			// shape); the newline ends a comment the user's may end with.
			expr = "(" + alsoFilter + ") and (" + user + "\n)"
		}
		prog, err := jq.Compile("--filter", expr, vars)
		if err != nil {
			return nil, cmdline.Usage(err)
		}
		o.Filter = prog
	}
	return o, nil
}

// parseExec reads --exec and the flags that go with it.
func (o *Options) parseExec(c *cli.Context) error {
	rendering := len(c.StringSlice("render")) > 0
	if !c.IsSet("exec") && !rendering {
		for _, f := range []string{"exec-retries", "exec-timeout"} {
			if c.IsSet(f) {
				return cmdline.Usagef("--%s: only with --exec", f)
			}
		}
		return nil
	}
	// They go with --render's --check and --reload too.
	o.ExecRetries = c.Int("exec-retries")
	timeout := c.Duration("exec-timeout")
	switch {
	case o.ExecRetries < 0:
		return cmdline.Usagef("--exec-retries: must not be negative, got %d", o.ExecRetries)
	case timeout < 0:
		return cmdline.Usagef("--exec-timeout: must not be negative, got %v", timeout)
	}
	// A signal reaches a running handler (or check, or reload), which
	// gets its grace period.
	o.WriteGrace = handler.DefaultGrace + time.Second
	if !c.IsSet("exec") {
		return nil // parseRender
	}
	h := &handler.Handler{Command: c.String("exec"), Timeout: timeout}
	switch {
	case strings.TrimSpace(h.Command) == "":
		return cmdline.Usagef("--exec: want a command")
	case o.Output.Format != stream.JSON:
		return cmdline.Usagef("--exec: the handler reads NDJSON; --output %s is not for it", c.String("output"))
	case o.Heartbeat > 0:
		return cmdline.Usagef("--heartbeat: not with --exec, which runs the handler only when there is something to deliver")
	}
	o.Handler = h
	return nil
}

// OpenState opens --state and sets the run up to record into it, and to
// resume from what it recorded; nil without --state. The caller closes
// it once the run has ended.
func (o *Options) OpenState() (*state.Store, error) {
	if o.stateFile == "" {
		return nil, nil
	}
	st, err := state.Open(o.stateFile, o.Follows)
	if err != nil {
		return nil, cmdline.Usage(err)
	}
	if st.Resumed() {
		view, err := st.View()
		var inflight []flow.Event
		if err == nil {
			inflight, err = st.InFlight()
		}
		if err != nil {
			st.Close()
			return nil, cmdline.Usage(err)
		}
		o.Resume = &watch.Resume{View: view, InFlight: inflight, Batch: st.Batch()}
	}
	o.State = st
	return st, nil
}

// parseTiming reads --stable and --settle.
func (o *Options) parseTiming(c *cli.Context) error {
	o.Stable = c.Duration("stable")
	switch {
	case !c.IsSet("stable"):
	case c.String("until") == "" && c.String("each") == "":
		return cmdline.Usagef("--stable: only with --until or --each, whose goal must hold")
	case o.Stable <= 0:
		return cmdline.Usagef("--stable: must be positive, got %v", o.Stable)
	}
	if !c.IsSet("settle") {
		return nil
	}
	if !c.IsSet("exec") && len(c.StringSlice("render")) == 0 {
		return cmdline.Usagef("--settle: only with --exec or --render, whose deliveries it holds back")
	}
	s, err := ParseSettle(c.String("settle"))
	if err != nil {
		return cmdline.Usagef("--settle: %v", err)
	}
	o.Settle = s
	return nil
}

// ParseSettle parses MIN[:MAX], two durations, MAX at least MIN (4×MIN
// when left out).
func ParseSettle(s string) (watch.Settle, error) {
	lo, hi, both := strings.Cut(s, ":")
	min, err := time.ParseDuration(lo)
	if err != nil {
		return watch.Settle{}, fmt.Errorf("want MIN[:MAX], two durations such as 2s:10s: %v", err)
	}
	max := 4 * min
	if both {
		if max, err = time.ParseDuration(hi); err != nil {
			return watch.Settle{}, fmt.Errorf("want MIN[:MAX], two durations such as 2s:10s: %v", err)
		}
	}
	switch {
	case min <= 0:
		return watch.Settle{}, fmt.Errorf("MIN must be positive, got %v", min)
	case max < min:
		return watch.Settle{}, fmt.Errorf("MAX (%v) must not be less than MIN (%v)", max, min)
	}
	return watch.Settle{Min: min, Max: max}, nil
}
