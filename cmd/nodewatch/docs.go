package main

// What nodewatch prints about itself: its version, its man page, and
// its shell completion (the scripts, and the candidates they ask for).

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/completions"
	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/console"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/version"
)

// versionCommand prints what build this is, from the build information
// the Go toolchain records: the module version, the VCS commit and time,
// whether the tree was modified, and the Go version.
func versionCommand(e *env) *cli.Command {
	return subcommand("version", "print nodewatch's version, commit and Go version", "", nil,
		func(c *cli.Context) error {
			if c.Args().Present() {
				return cmdline.Usagef("version takes no arguments")
			}
			return printVersion(e)
		})
}

// printVersion prints what `nodewatch version` and `nodewatch --version`
// print.
func printVersion(e *env) error {
	info, ok := debug.ReadBuildInfo()
	_, err := fmt.Fprint(e.stdout, version.Text(version.Linked(), info, ok))
	return err
}

// helpCommand is `nodewatch help [COMMAND]`, as gh and kubectl have it: the
// --help of nodewatch, or of the command named.
func helpCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show nodewatch's help, or a command's",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cmdline.Usagef("help takes at most one command")
			}
			name := c.Args().First()
			if name == "help" {
				return unknownCommand(c.App, name, "nodewatch help")
			}
			cmd, err := helpTopic(c.App, name, "nodewatch help")
			if err != nil {
				return err
			}
			return showHelp(e, c.App, cmd)
		},
	}
}

// manCommand prints nodewatch's man page (section 1), generated from the
// command-line definition; `make generate` writes it to docs/nodewatch.1.
func manCommand(e *env, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			_, err := fmt.Fprint(e.stdout, cmdline.Man(app(),
				cmdline.ManSection{Title: "EXIT STATUS", Text: exitStatus()},
				cmdline.ManSection{Title: "ENVIRONMENT", Text: "A flag given on the command line wins over its variable.\n\n" +
					envVars(app()) + docs.Help("environment")},
				cmdline.ManSection{Title: "SEE ALSO", Text: "jq(1), etcdctl(1), metroctl; docs/reference.md in the source."}))
			return err
		},
	}
}

// envVars lists the variables that flags of app's commands read, each
// with the flags and commands, for the man page's ENVIRONMENT.
func envVars(app *cli.App) string {
	var order []string
	users := map[string][]string{}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			if df, ok := f.(cli.DocGenerationFlag); ok {
				for _, v := range df.GetEnvVars() {
					key := v + "\n   --" + f.Names()[0] + ", for "
					if users[key] == nil {
						order = append(order, key)
					}
					users[key] = append(users[key], c.Name)
				}
			}
		}
	}
	var b strings.Builder
	for _, k := range order {
		b.WriteString(k + strings.Join(users[k], ", ") + "\n")
	}
	return b.String()
}

// completionCommand prints a shell completion script, as package
// completions holds them.
func completionCommand(e *env) *cli.Command {
	return subcommand("completion", "print a shell completion script (bash, zsh or fish)", "bash|zsh|fish", nil,
		func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cmdline.Usagef("completion: want one shell (bash, zsh or fish), got %d arguments", c.NArg())
			}
			script, err := completionScript(c.Args().First())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, script)
			return err
		})
}

// completionScript returns the completion script for shell.
func completionScript(shell string) (string, error) {
	switch shell {
	case "bash":
		return completions.Bash, nil
	case "zsh":
		return completions.Zsh, nil
	case "fish":
		return completions.Fish, nil
	}
	return "", cmdline.Usagef("completion: want bash, zsh or fish, got %q", shell)
}

// complete prints the candidates for the last of words (the word at the
// cursor) after the others, one a line (cmdline.Complete): what the
// completion scripts ask with `nodewatch __complete`. Nothing runs.
func complete(e *env, app *cli.App, words []string) int {
	cur := ""
	if n := len(words); n > 0 {
		words, cur = words[:n-1], words[n-1]
	}
	values := map[string][]string{
		"output": stream.Formats(), "color": console.Colors(), "value": etcdkv.ValueModes(), "mgmt": etcdkv.MgmtAreas(), "format": sim.Formats(),
	}
	for _, c := range cmdline.Complete(app, words, cur, values) {
		fmt.Fprintln(e.stdout, c)
	}
	return exitOK
}
