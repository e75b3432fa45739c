package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/cmdline"
)

// env is what a run may touch of the outside world.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	// reloads, if set, subscribes the run to reload requests (SIGHUP:
	// main sets it, as only main touches signals). It returns a channel
	// that receives one value per request, and stop, which ends the
	// subscription; the caller must call stop. Commands that do not reload
	// never call it, so SIGHUP keeps its default effect on them: the
	// process ends, as with a terminal hanging up.
	reloads func() (requests <-chan os.Signal, stop func())

	// oneProc: watches run on one P (watch.Options.OneProc). main sets it
	// unless the user set GOMAXPROCS; in-process tests leave their test
	// binary alone.
	oneProc bool
}

// logf writes one "nodewatch: ..." line to stderr.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "nodewatch: "+format+"\n", args...)
}

// run is nodewatch without the process around it: it parses args, does
// the work and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(ctx, &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}, args)
}

// runEnv is run in the environment e (tests give their own).
func runEnv(ctx context.Context, e *env, args []string) int {
	app := newApp(e)
	args, err := normalizeArgs(app, args)
	if err == nil {
		err = app.RunContext(ctx, append([]string{"nodewatch"}, args...))
	}
	if err != nil && ctx.Err() != nil {
		err = context.Canceled // SIGINT or SIGTERM: the signal context ended
	}
	code, report := exitCode(err)
	if report {
		e.logf("%v", err)
	}
	return code
}

func newApp(e *env) *cli.App {
	onUsage := func(c *cli.Context, err error, _ bool) error {
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != "" {
			flags = c.Command.Flags
		}
		return usage(cmdline.Explain(err, flagKinds(flags)))
	}
	self := func() *cli.App { return newApp(e) } // for what is generated from the definition
	commands := []*cli.Command{
		nodesCommand(e), nodeCommand(e), keyCommand(e), serveCommand(e), simCommand(e),
		completionCommand(e, self), versionCommand(e), manCommand(e, self),
	}
	for _, c := range commands {
		if codes := exitCodesHelp(c.Name); codes != "" {
			c.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + codes
		}
		c.OnUsageError = onUsage
		// urfave/cli's own help flag is one package-level value that every
		// run writes to when it parses flags; runs in one process (the
		// tests) would race on it. Each command gets a help flag of its own.
		c.HideHelp = true
		c.Flags = append(c.Flags, helpFlag())
	}
	return &cli.App{
		Name:                      "nodewatch",
		HideHelp:                  true,
		HideVersion:               true, // `nodewatch version` instead
		Flags:                     []cli.Flag{helpFlag()},
		Usage:                     "follow cluster state as newline-delimited JSON",
		Description:               docs.Help("nodewatch") + "\n\n" + exitCodesBrief(),
		CustomAppHelpTemplate:     cli.AppHelpTemplate + "\n" + exitCodesHelp("nodes"),
		Writer:                    e.stdout,
		ErrWriter:                 e.stderr,
		Commands:                  commands,
		HideHelpCommand:           true,
		EnableBashCompletion:      true,
		DisableSliceFlagSeparator: true,
		OnUsageError:              onUsage,
		ExitErrHandler:            func(*cli.Context, error) {},
		CommandNotFound: func(c *cli.Context, name string) {
			// urfave/cli offers no error return here; Action below reports it.
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q (try nodewatch --help)", c.Args().First())
			}
			return usagef("no command given (try nodewatch --help)")
		},
	}
}

// helpFlag is --help, -h: a flag value for one command of one run.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true}
}

// normalizeArgs rewrites a command line into the shape urfave/cli parses
// (cmdline.Normalize), given the flags of the command it names.
func normalizeArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) > 0 && args[len(args)-1] == "--generate-bash-completion" {
		// Completing: nothing may run. urfave/cli runs the command when a
		// "--" is on the line (`nodewatch key --<TAB>` asks with one), so
		// it goes; what is completed, urfave/cli reads from os.Args.
		return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--" }), nil
	}
	if len(args) == 0 {
		return args, nil
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[0]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args, nil
	}
	takesValue := map[string]bool{}
	for name, k := range flagKinds(cmd.Flags) {
		takesValue[name] = k != cmdline.Bool
	}
	rest, err := cmdline.Normalize(args[1:], takesValue)
	if err != nil {
		return nil, usage(err)
	}
	return append(args[:1:1], rest...), nil
}

// flagKinds says what each flag takes, by every name it has.
func flagKinds(flags []cli.Flag) map[string]cmdline.Kind {
	kinds := map[string]cmdline.Kind{}
	for _, f := range flags {
		k := cmdline.String
		switch f.(type) {
		case *cli.BoolFlag:
			k = cmdline.Bool
		case *cli.DurationFlag:
			k = cmdline.Duration
		case *cli.IntFlag, *cli.Int64Flag:
			k = cmdline.Int
		case *cli.Float64Flag:
			k = cmdline.Float
		}
		for _, n := range f.Names() {
			kinds[n] = k
		}
	}
	return kinds
}

// action is a command's Action: parse its options from the flags, then run
// with them.
func action[O any](e *env, parse func(*cli.Context, *env) (O, error), run func(context.Context, *env, O) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		o, err := parse(c, e)
		if err != nil {
			return err
		}
		return run(c.Context, e, o)
	}
}

// subcommand is a command whose --help prose is docs/help/NAME.txt.
func subcommand(name, usage, argsUsage string, flags []cli.Flag, action cli.ActionFunc) *cli.Command {
	return &cli.Command{Name: name, Usage: usage, ArgsUsage: argsUsage, Description: docs.Help(name), Flags: flags, Action: action}
}
