package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/connflags"
	"github.com/nodewatch/nodewatch/internal/console"
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

// debugf is logf with -v (verbose), nil without: the lines only -v
// asks for.
func (e *env) debugf(verbose bool) func(format string, args ...any) {
	if verbose {
		return e.logf
	}
	return nil
}

// conn is what parsing the connection flags may touch.
func (e *env) conn() connflags.Env {
	return connflags.Env{Getenv: e.getenv, Logf: e.logf, Stdin: e.stdin, Stderr: e.stderr}
}

// runEnv is run in the environment e (tests give their own).
func runEnv(ctx context.Context, e *env, args []string) int {
	app := newApp(e)
	switch n := len(args); {
	case n > 0 && args[0] == cmdline.CompleteCommand:
		return complete(e, app, args[1:])
	case n > 0 && args[n-1] == cmdline.LegacyCompleteFlag:
		// An older script: the word at the cursor is there only when it
		// starts with "-".
		words := args[:n-1]
		if len(words) == 0 || !strings.HasPrefix(words[len(words)-1], "-") {
			words = append(slices.Clone(words), "")
		}
		return complete(e, app, words)
	}
	args, err := cmdline.Args(app, args)
	if err != nil {
		err = cmdline.Usage(err)
	} else {
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
	onUsage := cmdline.OnUsageError(cmdline.Usage)
	self := func() *cli.App { return newApp(e) } // for what is generated from the definition
	commands := []*cli.Command{
		nodesCommand(e), nodeCommand(e), keyCommand(e), serveCommand(e), simCommand(e),
		completionCommand(e), versionCommand(e), helpCommand(e), manCommand(e, self),
	}
	for _, c := range commands {
		c.OnUsageError = onUsage
		// nodewatch prints help itself (showHelp), at the width of the
		// terminal: urfave/cli's own help flag and printer are
		// package-level values that runs in one process (the tests) would
		// share. Each command gets a help flag of its own.
		c.HideHelp = true
		help := cmdline.NewHelpFlag()
		c.Flags = append(c.Flags, help)
		c.Before = func(c *cli.Context) error {
			if help.Asked() {
				return showHelp(e, c.App, c.Command)
			}
			return nil
		}
	}
	help := cmdline.NewHelpFlag()
	return &cli.App{
		Name:                      "nodewatch",
		HideHelp:                  true,
		HideVersion:               true, // urfave/cli's is a package-level value: see above
		Flags:                     []cli.Flag{help, versionFlag()},
		Usage:                     "follow cluster state as newline-delimited JSON",
		Description:               docs.Help("nodewatch") + "\n\n" + exitCodesBrief(),
		Writer:                    e.stdout,
		ErrWriter:                 e.stderr,
		Commands:                  commands,
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true,
		OnUsageError:              onUsage,
		ExitErrHandler:            func(*cli.Context, error) {},
		CommandNotFound: func(c *cli.Context, name string) {
			// urfave/cli offers no error return here; Action below reports it.
		},
		// Before the command named runs: nodewatch --help [COMMAND] is
		// help, whatever follows.
		Before: func(c *cli.Context) error {
			if !help.Asked() {
				return nil
			}
			cmd, err := helpTopic(c.App, c.Args().First(), "nodewatch --help")
			if err != nil {
				return err
			}
			return showHelp(e, c.App, cmd)
		},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				if c.Args().Present() {
					return cmdline.Usagef("--version takes no command")
				}
				return printVersion(e)
			}
			if c.Args().Present() {
				return unknownCommand(c.App, c.Args().First(), "nodewatch --help")
			}
			return cmdline.Usagef("no command given (try nodewatch --help)")
		},
	}
}

// showHelp prints the --help of app's command cmd (of app itself when
// cmd is nil or help), wrapped to the width of the terminal stdout is,
// and ends the run (cmdline.ErrHelpShown).
func showHelp(e *env, app *cli.App, cmd *cli.Command) error {
	if cmd != nil && cmd.Name == "help" {
		cmd = nil
	}
	codes := "nodes" // the app's help lists the watching commands' codes
	if cmd != nil {
		codes = cmd.Name
	}
	width := cmdline.HelpWidth(console.Width(e.stdout))
	section := cmdline.HelpSection{Title: "EXIT CODES", Rows: exitCodesRows(codes)}
	if err := cmdline.WriteHelp(e.stdout, width, app, cmd, section); err != nil {
		return err
	}
	return cmdline.ErrHelpShown
}

// helpTopic returns the command of app whose help `help NAME` and
// `--help NAME` ask for (nil for "": the app's), or a usage error for a
// name that is no visible command; try is what to try instead.
func helpTopic(app *cli.App, name, try string) (*cli.Command, error) {
	if name == "" {
		return nil, nil
	}
	cmd := app.Command(name)
	if cmd == nil || cmd.Hidden {
		return nil, unknownCommand(app, name, try)
	}
	return cmd, nil
}

// unknownCommand is the usage error for a command name that is not one
// of app's, with the closest command if one is near, and what to try.
func unknownCommand(app *cli.App, name, try string) error {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if near := cmdline.Nearest(name, names); len(near) > 0 {
		return cmdline.Usagef("unknown command %q (did you mean %s?)", name, strings.Join(near, " or "))
	}
	return cmdline.Usagef("unknown command %q (try %s)", name, try)
}

// versionFlag is nodewatch --version, which prints what `nodewatch
// version` prints. No -v: that is the verbose flag of many other tools.
func versionFlag() cli.Flag {
	return &cli.BoolFlag{Name: "version", Usage: "print the version and exit", DisableDefaultText: true}
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
