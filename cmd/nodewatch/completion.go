package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"

	"github.com/nodewatch/nodewatch/completions"
	"github.com/nodewatch/nodewatch/docs"
)

// completionCommand prints a shell completion script: bash and zsh as
// package completions holds them, fish generated from the command-line
// definition of the binary that prints it.
func completionCommand(e *env, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:        "completion",
		Usage:       "print a shell completion script (bash, zsh or fish)",
		ArgsUsage:   "bash|zsh|fish",
		Description: docs.Help("completion"),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cmdline.Usagef("completion: want one shell (bash, zsh or fish), got %d arguments", c.NArg())
			}
			script, err := completionScript(c.Args().First(), app)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, script)
			return err
		},
	}
}

// completionScript returns the completion script for shell.
func completionScript(shell string, app func() *cli.App) (string, error) {
	switch shell {
	case "bash":
		return completions.Bash, nil
	case "zsh":
		return completions.Zsh, nil
	case "fish":
		script, err := app().ToFishCompletion()
		// urfave/cli offers files beside the commands, where nodewatch
		// takes none, and keeps the backquotes that mark placeholders in
		// the flags' usage.
		script = strings.ReplaceAll(script, "`", "")
		return script + "complete -c nodewatch -n '__fish_nodewatch_no_subcommand' -f\n", err
	}
	return "", cmdline.Usagef("completion: want bash, zsh or fish, got %q", shell)
}
