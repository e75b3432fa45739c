package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/console"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/progress"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/watch"
)

// watchFlags are the flags every watching subcommand (key, nodes, node)
// shares: what to print, how, and when to stop.
func watchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "filter", Usage: "jq `EXPR`: print only objects for which it is true"},
		&cli.StringFlag{Name: "equals", Usage: "jq `EXPR`: two states are equal (no `updated`) when it gives the same outputs for both"},
		&cli.StringFlag{Name: "until", Usage: "jq `EXPR` over the current view: exit 0 after the batch where it becomes true"},
		&cli.StringSliceFlag{Name: "arg", Usage: "bind $NAME to the string VALUE in every expression (`NAME VALUE`)"},
		&cli.StringSliceFlag{Name: "argjson", Usage: "bind $NAME to the JSON text in every expression (`NAME JSON`)"},
		&cli.BoolFlag{Name: "strict", Usage: "a jq evaluation error ends the run (exit 1) instead of a warning"},
		&cli.BoolFlag{Name: "once", Usage: "print the initial state, then exit 0"},
		&cli.IntFlag{Name: "count", Usage: "exit 0 after `N` new/updated/deleted events"},
		&cli.DurationFlag{Name: "timeout", Usage: "end the run after `D`; exit 124 if --once/--until/--count was not met"},
		&cli.BoolFlag{Name: "changes-only", Usage: "build the initial state silently; print only later changes"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "`FORMAT`: json (NDJSON), pretty (indented JSON) or text (one human line per event)"},
		&cli.BoolFlag{Name: "timestamps", Usage: "add \"ts\" (RFC 3339, UTC) to every line"},
		&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second, Usage: "exit 3 when no connection is made within `D`"},
		&cli.DurationFlag{Name: "heartbeat", Usage: "when nothing was printed for `D`, print {\"type\":\"heartbeat\",…} if the source just confirmed it is current (etcd: at rev N; Curator: the connection)"},
	}
}

// watchOptions are the parsed watchFlags, validated before anything
// connects.
type watchOptions struct {
	filter, equals, until *jq.Program
	strict                bool
	once                  bool
	count                 int
	timeout               time.Duration
	changesOnly           bool
	format                stream.Format
	timestamps            bool
	dialTimeout           time.Duration
	heartbeat             time.Duration // 0: none
	// list: --until sees an array of objects (else one object or null).
	list bool
	// summary is what -o text shows of an object; nil shows it all.
	summary func(obj any) string
	// changeRoot is the part of an object whose changes -o text shows
	// for an update (nil: all of it).
	changeRoot jsondoc.Path
	// target names what is watched in messages, e.g. "curator at a,b".
	target string
	// confirms names what the source's confirmations confirm, for
	// --heartbeat: "watch" (etcd) or "connection" (Curator).
	confirms string
}

// parseWatchOptions reads watchFlags from c. defaultEquals is used when
// --equals is not given ("" compares whole objects); alsoFilter, a jq
// expression the command adds to the user's --filter ("" for none), must
// hold too.
func parseWatchOptions(c *cli.Context, defaultEquals, alsoFilter string) (*watchOptions, error) {
	o := &watchOptions{
		strict:      c.Bool("strict"),
		once:        c.Bool("once"),
		count:       c.Int("count"),
		timeout:     c.Duration("timeout"),
		changesOnly: c.Bool("changes-only"),
		timestamps:  c.Bool("timestamps"),
		dialTimeout: c.Duration("dial-timeout"),
		heartbeat:   c.Duration("heartbeat"),
	}
	if o.heartbeat < 0 || (c.IsSet("heartbeat") && o.heartbeat < 100*time.Millisecond) {
		return nil, usagef("--heartbeat: must be at least 100ms, got %v", o.heartbeat)
	}
	f, err := stream.ParseFormat(c.String("output"))
	if err != nil {
		return nil, usagef("--output: %v", err)
	}
	o.format = f
	if o.count < 0 {
		return nil, usagef("--count: must not be negative, got %d", o.count)
	}
	if o.timeout < 0 || o.dialTimeout <= 0 {
		return nil, usagef("--timeout and --dial-timeout must be positive")
	}
	var vars jq.Vars
	for _, a := range c.StringSlice("arg") {
		name, value, ok := strings.Cut(a, argSep)
		if !ok {
			return nil, usagef("--arg: want NAME VALUE, got %q", a)
		}
		vars.Add(name, value)
	}
	for _, a := range c.StringSlice("argjson") {
		name, value, ok := strings.Cut(a, argSep)
		if !ok {
			return nil, usagef("--argjson: want NAME JSON, got %q", a)
		}
		if err := vars.AddJSON(name, value); err != nil {
			return nil, usagef("--argjson %s: %v", name, err)
		}
	}
	equals := c.String("equals")
	if !c.IsSet("equals") {
		equals = defaultEquals
	}
	for _, p := range []struct {
		flag, expr string
		dst        **jq.Program
	}{{"--filter", c.String("filter"), &o.filter}, {"--equals", equals, &o.equals}, {"--until", c.String("until"), &o.until}} {
		if p.expr == "" {
			continue
		}
		prog, err := jq.Compile(p.flag, p.expr, vars)
		if err != nil {
			return nil, usage(err)
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
			return nil, usage(err)
		}
		o.filter = prog
	}
	return o, nil
}

// follow runs the watch pipeline from src to stdout and turns how it
// ended into the command's result (see exit.go).
func follow(ctx context.Context, e *env, o *watchOptions, src watch.Source) error {
	tty := console.IsTerminal(e.stdout)
	out := e.stdout
	var meter *progress.Meter
	if console.IsTerminal(e.stderr) {
		// A long listing shows its progress on the terminal; every other
		// write to it (log lines, and stdout when it is the same terminal)
		// erases that line first. Sources log through e, so they too.
		meter = progress.New(e.stderr, 0)
		if tty {
			out = meter.Writer(e.stdout)
		}
		stderr := e.stderr
		e.stderr = meter.Writer(stderr)
		defer func() { e.stderr = stderr }()
	}
	res, err := watch.Run(ctx, src, out, watch.Options{
		Filter:      o.filter,
		Equals:      o.equals,
		Until:       o.until,
		List:        o.list,
		Strict:      o.strict,
		Once:        o.once,
		Count:       o.count,
		Timeout:     o.timeout,
		ChangesOnly: o.changesOnly,
		Output: stream.Options{
			Format:        o.format,
			Timestamps:    o.timestamps,
			FlushEachLine: tty,
			Color:         tty && e.getenv("NO_COLOR") == "",
			Summary:       o.summary,
			ChangeRoot:    o.changeRoot,
			Width:         console.Width(e.stdout),
		},
		Logf:      e.logf,
		Hangup:    func(ctx context.Context) bool { return console.WaitHangup(ctx, e.stdout) },
		Progress:  meter,
		Heartbeat: o.heartbeat,
		Confirms:  o.confirms,
		OneProc:   e.oneProc,
	})
	return stopError(res, err, o.target, o.timeout, o.goal())
}

// goal describes the goal the options set, for a run that timed out
// before it was met.
func (o *watchOptions) goal() string {
	switch {
	case o.until != nil:
		return "--until was met"
	case o.once:
		return "the initial state was printed (--once)"
	}
	return fmt.Sprintf("%d events were printed (--count)", o.count)
}
