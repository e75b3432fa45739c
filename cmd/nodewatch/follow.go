package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/nodeset"
	"github.com/nodewatch/nodewatch/internal/stream"
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
	}
}

// watchOptions are the parsed watchFlags, validated before anything
// connects.
type watchOptions struct {
	filter, equals, until *stream.Program
	strict                bool
	once                  bool
	count                 int
	timeout               time.Duration
	changesOnly           bool
	format                stream.Format
	timestamps            bool
	dialTimeout           time.Duration
	// list: --until sees an array of objects (else one object or null).
	list bool
	// summary is what -o text shows of an object; nil shows it all.
	summary func(obj any) string
	// target names what is watched in messages, e.g. "curator at a,b".
	target string
}

// parseWatchOptions reads watchFlags from c. defaultEquals is used when
// --equals is not given ("" compares whole objects).
func parseWatchOptions(c *cli.Context, defaultEquals string) (*watchOptions, error) {
	o := &watchOptions{
		strict:      c.Bool("strict"),
		once:        c.Bool("once"),
		count:       c.Int("count"),
		timeout:     c.Duration("timeout"),
		changesOnly: c.Bool("changes-only"),
		timestamps:  c.Bool("timestamps"),
		dialTimeout: c.Duration("dial-timeout"),
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
	var vars stream.Vars
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
			return nil, &usageError{err}
		}
	}
	equals := c.String("equals")
	if !c.IsSet("equals") {
		equals = defaultEquals
	}
	for _, p := range []struct {
		flag, expr string
		dst        **stream.Program
	}{{"--filter", c.String("filter"), &o.filter}, {"--equals", equals, &o.equals}, {"--until", c.String("until"), &o.until}} {
		if p.expr == "" {
			continue
		}
		prog, err := stream.Compile(p.flag, p.expr, vars)
		if err != nil {
			return nil, &usageError{err}
		}
		*p.dst = prog
	}
	return o, nil
}

// goal names what ends the run successfully, "" if nothing does.
func (o *watchOptions) goal() string {
	switch {
	case o.until != nil:
		return "--until was met"
	case o.once:
		return "the initial state was printed (--once)"
	case o.count > 0:
		return fmt.Sprintf("%d events were printed (--count)", o.count)
	}
	return ""
}

// source produces batches into a mailbox until ctx ends or it fails.
type source func(ctx context.Context, out nodeset.Sink) error

// errRunTimeout is the cause of the watch context's end when --timeout
// passes. A plain cancellation, not a context deadline: a deadline would
// travel to the server with every gRPC call, and its end would look like a
// broken stream there.
var errRunTimeout = errors.New("--timeout passed")

// writeGrace is how long a blocked write may still finish once the run
// has to end (a signal, --timeout): a reader that stopped reading must not
// keep nodewatch alive.
const writeGrace = time.Second

// follow runs the pipeline source → follower → encoder until a goal is
// met, the timeout passes, ctx ends or something fails.
func follow(ctx context.Context, e *env, o *watchOptions, src source) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.timeout > 0 {
		t := time.AfterFunc(o.timeout, func() { cancel(errRunTimeout) })
		defer t.Stop()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // runs before wg.Wait

	mb := handoff.New(0)
	wg.Add(1)
	go func() {
		defer wg.Done()
		mb.Close(src(runCtx, mb))
	}()

	// A reader that goes away ends the run quietly, even when idle.
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchHangup(runCtx, e.stdout, func() { cancel(errOutputClosed) })
	}()

	tty := isTerminal(e.stdout)
	enc := stream.NewEncoder(&abandonableWriter{w: e.stdout, stop: runCtx.Done()}, stream.Options{
		Format:        o.format,
		Timestamps:    o.timestamps,
		FlushEachLine: tty,
		Color:         tty && e.getenv("NO_COLOR") == "",
		Summary:       o.summary,
	})
	// end turns the reason the run stops into its result.
	received := false
	end := func(err error) error {
		switch cause := context.Cause(runCtx); {
		case ctx.Err() != nil:
			return errInterrupted
		case errors.Is(cause, errOutputClosed):
			return errOutputClosed
		case errors.Is(cause, errRunTimeout):
			if !received {
				// Never connected: that is "unavailable", whatever the goal.
				return &unavailableError{fmt.Errorf("no connection to %s within --timeout %v", o.target, o.timeout)}
			}
			if g := o.goal(); g != "" {
				return &goalTimeoutError{goal: g}
			}
			return nil
		}
		return err
	}

	x := &exprs{o: o, e: e}
	fol := nodeset.NewFollower(x.filterFunc(), x.equalsFunc())
	printed, batches := 0, 0
	for {
		b, err := mb.Next(runCtx)
		if err == nil && runCtx.Err() != nil {
			// Queued batches wait in vain once the run has to end.
			err = runCtx.Err()
		}
		if err != nil {
			enc.Flush()
			return end(err)
		}
		received = true
		silent := o.changesOnly && b.Cause == nodeset.CauseInitial
		changed := false
		err = fol.Apply(b, func(ev nodeset.Event) error {
			changed = true
			if silent {
				return nil
			}
			if ev.Type == nodeset.BatchDone {
				batches++
				ev.Batch = batches // number what is printed (--changes-only)
			} else {
				printed++
			}
			if err := enc.Encode(ev); err != nil {
				return err
			}
			if o.count > 0 && printed >= o.count {
				return errGoalMet
			}
			return nil
		})
		if errors.Is(err, errGoalMet) {
			if err := enc.Flush(); err != nil {
				return end(err)
			}
			return nil
		}
		if err == nil {
			err = enc.Flush()
		}
		if err != nil {
			return end(err)
		}
		if o.once && b.Synced {
			return nil
		}
		if o.until != nil && changed {
			met, err := x.untilMet(fol.Set())
			if err != nil {
				return err
			}
			if met {
				return nil
			}
		}
	}
}

// abandonableWriter writes to w, but gives up on writes still blocked
// writeGrace after stop is closed (one deadline for all of them): the
// reader of a pipe may have stopped reading (`| sleep 60`, a paused
// pager), and a signal or --timeout must still end the run. The abandoned
// write goes on in its goroutine until the process exits; the encoder's
// error is sticky, so nothing writes after it. It is used by one goroutine.
type abandonableWriter struct {
	w         io.Writer
	stop      <-chan struct{}
	deadline  <-chan time.Time // set once stop is seen closed
	abandoned bool             // the deadline passed: every write gives up at once
}

var errWriteAbandoned = errors.New("write abandoned: the reader does not read")

func (a *abandonableWriter) Write(p []byte) (int, error) {
	if a.abandoned {
		return 0, errWriteAbandoned
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := a.w.Write(p)
		done <- result{n, err}
	}()
	if a.deadline == nil {
		select {
		case r := <-done:
			return r.n, r.err
		case <-a.stop:
			a.deadline = time.After(writeGrace)
		}
	}
	select {
	case r := <-done:
		return r.n, r.err
	case <-a.deadline:
		a.abandoned = true
		return 0, errWriteAbandoned
	}
}

// errGoalMet stops a batch early once --count is reached.
var errGoalMet = errors.New("goal met")

// exprs applies the user's jq programs with the --strict policy: an
// evaluation error is a warning and counts as "no match", or is fatal.
type exprs struct {
	o *watchOptions
	e *env
}

func (x *exprs) filterFunc() func(id string, obj any) (bool, error) {
	if x.o.filter == nil {
		return nil
	}
	return func(id string, obj any) (bool, error) {
		ok, err := x.o.filter.Truthy(obj)
		return ok, x.evalError(id, err)
	}
}

func (x *exprs) equalsFunc() func(id string, a, b any) (bool, error) {
	if x.o.equals == nil {
		return nil
	}
	return func(id string, a, b any) (bool, error) {
		eq, err := x.o.equals.Equal(a, b)
		return eq, x.evalError(id, err) // on error eq is false: print the change
	}
}

func (x *exprs) untilMet(set *nodeset.Set) (bool, error) {
	var view any
	if x.o.list {
		view = set.Objects()
	} else {
		set.Ascend(func(_ string, obj any) bool {
			view = obj
			return false
		})
	}
	ok, err := x.o.until.Truthy(view)
	return ok, x.evalError("", err)
}

// evalError applies --strict to an evaluation error on the object with
// the given id ("" for the whole view).
func (x *exprs) evalError(id string, err error) error {
	if err == nil {
		return nil
	}
	if x.o.strict {
		return err // the follower adds the id
	}
	if id != "" {
		err = fmt.Errorf("%q: %w", id, err)
	}
	x.e.logf("warning: %v (treated as no match)", err)
	return nil
}
