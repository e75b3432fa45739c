package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/completions"
	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/stream"
)

// completionCommand prints a shell completion script, as package
// completions holds them.
func completionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "completion",
		Usage:       "print a shell completion script (bash, zsh or fish)",
		ArgsUsage:   "bash|zsh|fish",
		Description: docs.Help("completion"),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cmdline.Usagef("completion: want one shell (bash, zsh or fish), got %d arguments", c.NArg())
			}
			script, err := completionScript(c.Args().First())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, script)
			return err
		},
	}
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
// completion scripts ask with --generate-bash-completion. Nothing runs.
func complete(e *env, app *cli.App, words []string) int {
	cur := ""
	if n := len(words); n > 0 {
		words, cur = words[:n-1], words[n-1]
	}
	values := map[string][]string{
		"output": stream.Formats(), "value": etcdkv.ValueModes(), "mgmt": etcdkv.MgmtAreas(), "format": sim.Formats(),
	}
	for _, c := range cmdline.Complete(app, words, cur, values) {
		fmt.Fprintln(e.stdout, c)
	}
	return exitOK
}
