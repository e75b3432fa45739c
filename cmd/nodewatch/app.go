package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
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
	err := app.RunContext(ctx, append([]string{"nodewatch"}, normalizeArgs(app, args)...))
	if err != nil && ctx.Err() != nil {
		err = errInterrupted
	}
	code, report := exitCode(err)
	if report {
		e.logf("%v", err)
	}
	return code
}

func newApp(e *env) *cli.App {
	onUsage := func(_ *cli.Context, err error, _ bool) error { return usage(longFlags(err)) }
	self := func() *cli.App { return newApp(e) } // for what is generated from the definition
	commands := []*cli.Command{
		nodesCommand(e), nodeCommand(e), keyCommand(e), serveCommand(e), simCommand(e),
		completionCommand(e, self), versionCommand(e), manCommand(e, self),
	}
	for _, c := range commands {
		if meaning, ok := exitCodesOf[c.Name]; ok {
			c.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + exitCodesHelp(meaning)
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
		Description:               appDescription,
		CustomAppHelpTemplate:     cli.AppHelpTemplate + "\n" + exitCodesHelp(exitCodesOf["nodes"]),
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

// flagInMessage is a flag as Go's flag package names it in its errors:
// with one dash, whatever the user typed.
var flagInMessage = regexp.MustCompile(`(not defined|needs an argument|invalid value "[^"]*" for flag|invalid boolean value "[^"]*" for): -([a-z][a-z-]+)`)

// longFlags rewrites the flag package's "-name" into "--name", as the
// user typed it and as --help lists it (one-letter flags keep one dash).
func longFlags(err error) error {
	msg := flagInMessage.ReplaceAllString(err.Error(), "$1: --$2")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// helpFlag is --help, -h: a flag value for one command of one run.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true}
}

// argSep joins NAME and VALUE of --arg/--argjson into one flag value; NUL
// cannot occur in a command-line argument, so it cannot be ambiguous.
const argSep = "\x00"

// normalizeArgs rewrites a command line into the shape urfave/cli parses:
//   - jq's two-value `--arg NAME VALUE` becomes `--arg=NAME<NUL>VALUE`;
//   - flags after positional arguments move before them, so that
//     `nodewatch key /x --prefix` works as etcdctl users expect.
//
// Everything after `--` stays positional.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) == 0 || args[len(args)-1] == "--generate-bash-completion" {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[0]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, positional []string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case (name == "arg" || name == "argjson") && !hasValue && i+2 < len(rest):
			flags = append(flags, "--"+name+"="+rest[i+1]+argSep+rest[i+2])
			i += 2
		case takesValue[name] && !hasValue && i+1 < len(rest):
			flags = append(flags, a, rest[i+1])
			i++
		default:
			flags = append(flags, a)
		}
	}
	out := append([]string{args[0]}, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}
