package main

import (
	"context"
	"errors"
	"io"

	"github.com/nodewatch/nodewatch/internal/console"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/watch"
	"github.com/nodewatch/nodewatch/internal/watchflags"
)

// follow runs the watch pipeline from the source that source builds to
// stdout, and turns how it ended into the command's result (see
// exit.go). source is given what the run offers it (the filter to ask
// early, the progress meter's count), once the run is set up; it may set
// o.Hinter to the source it built (watch.Hinter: what it says when the
// view is empty after the initial state).
func follow(ctx context.Context, e *env, o *watchflags.Options, source func(flow.Hooks) (watch.Source, watch.Lister)) error {
	// A long listing shows its progress on a terminal stderr; every other
	// write to it (log lines, and stdout when it is the same terminal)
	// erases that line first. Sources log through e, so they too.
	stderr := e.stderr
	defer func() { e.stderr = stderr }()
	stdout := e.stdout
	if o.Handler == nil && o.Renderer == nil { // with --exec or --render, nodewatch writes nothing to stdout
		var release func()
		stdout, release = console.Output(e.stdout)
		defer release()
	}
	var out io.Writer
	out, e.stderr, o.Progress = console.Arrange(stdout, stderr, console.Dumb(e.getenv))
	tty := console.IsTerminal(e.stdout)
	o.Output.FlushEachLine = tty
	o.Output.Width, o.Output.Height = console.Size(e.stdout)
	o.Output.Screen = tty // -o table: drawn in place
	o.Output.Color = o.Color.On(tty, e.getenv)
	o.Logf, o.OneProc = e.logf, e.oneProc && !o.AllProcs
	o.Hangup = func(ctx context.Context) bool { return console.WaitHangup(ctx, e.stdout) }
	if o.Handler != nil {
		// The handler writes to stdout; nodewatch does not.
		o.Handler.Stdout, o.Handler.Stderr = e.stdout, stderr
		o.Exec, o.Hangup = o.Handler.Run, nil
	}
	if r := o.Renderer; r != nil {
		r.Stdout, r.Stderr, r.Logf = e.stdout, stderr, e.logf
		o.Render, o.Hangup = r.Render, nil
		if o.Once {
			o.Render = func(ctx context.Context, view any, attempt int) error {
				err := r.Render(ctx, view, attempt)
				if err == nil && !r.InStep() {
					err = watch.Final{Err: errors.New("--render --once: a file was left as it was (see above)")}
				}
				return err
			}
		}
	}
	st, err := o.OpenState() // --state
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	var src watch.Source
	src, o.Lister = source(o.Hooks())
	res, err := watch.Run(ctx, src, out, o.Options)
	if res.Report != nil {
		if rerr := o.Report(res, e.logf); rerr != nil {
			return rerr
		}
	}
	return stopError(res, err, o.Target, o.Timeout, o.Goal())
}
