package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/service"
	"github.com/nodewatch/nodewatch/internal/serviceflags"
)

// serveOptions are the flags of `nodewatch serve`.
type serveOptions struct {
	*serviceflags.Options
}

func serveCommand(e *env) *cli.Command {
	return subcommand("serve", "serve the Curator Watch API over node records kept in etcd", "",
		serviceflags.Flags(), action(e, parseServeOptions, runServe))
}

func parseServeOptions(c *cli.Context, e *env) (*serveOptions, error) {
	if c.NArg() > 0 {
		return nil, cmdline.Usagef("serve: takes no arguments, got %q", c.Args().First())
	}
	o, err := serviceflags.Parse(c, e.conn())
	if err != nil {
		return nil, err
	}
	return &serveOptions{o}, nil
}

func runServe(ctx context.Context, e *env, o *serveOptions) error {
	// Subscribed before serve says it serves: from then on SIGHUP
	// reloads, it does not end the process.
	if e.reloads != nil {
		c, stop := e.reloads()
		defer stop()
		o.Reloads = c
	}
	o.Log = o.Logger(e.stderr)
	if o.Dev != nil {
		o.Dev.Seed = time.Now().UnixNano()
		o.Dev.Logf = func(format string, args ...any) { o.Log.Warn(fmt.Sprintf(format, args...)) }
	}
	err := service.Run(ctx, o.Process)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// A signal: serve has drained, which is its normal end.
		o.Log.Info("stopped", "cause", context.Cause(ctx).Error())
		return nil
	}
	return err
}
