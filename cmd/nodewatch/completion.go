package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionCommand prints a shell completion script. The bash and zsh
// scripts ask nodewatch itself for candidates (urfave/cli's
// --generate-bash-completion), so they never go stale; the fish script is
// generated from the command-line definition of the binary that prints it.
func completionCommand(e *env, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Examples:
   source <(nodewatch completion bash)
   nodewatch completion zsh > "${fpath[1]}/_nodewatch"
   nodewatch completion fish > ~/.config/fish/completions/nodewatch.fish`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("completion: want one shell (bash, zsh or fish), got %d arguments", c.NArg())
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
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		script, err := app().ToFishCompletion()
		// urfave/cli offers files beside the commands, where nodewatch
		// takes none, and keeps the backquotes that mark placeholders in
		// the flags' usage.
		script = strings.ReplaceAll(script, "`", "")
		return script + "complete -c nodewatch -n '__fish_nodewatch_no_subcommand' -f\n", err
	}
	return "", usagef("completion: want bash, zsh or fish, got %q", shell)
}

const bashCompletion = `# bash completion for nodewatch
_nodewatch_complete() {
	local cur="${COMP_WORDS[COMP_CWORD]}"
	local opts
	if [[ "$cur" == -* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _nodewatch_complete nodewatch
`

const zshCompletion = `#compdef nodewatch
_nodewatch() {
	local -a opts
	local cur="${words[-1]}"
	if [[ "$cur" == -* ]]; then
		opts=("${(@f)$(${words[@]:0:#words[@]-1} "$cur" --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
	fi
	_describe 'values' opts
}
# Autoloaded from $fpath (as _nodewatch), this file is the function's first
# call: complete now. Sourced, register the function.
if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then
	_nodewatch "$@"
else
	compdef _nodewatch nodewatch
fi
`
