package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// completionCommand prints a shell completion script. The scripts ask
// nodewatch itself for candidates (urfave/cli's --generate-bash-completion),
// so they never go stale.
func completionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash or zsh)",
		ArgsUsage: "bash|zsh",
		Description: `Examples:
   source <(nodewatch completion bash)
   nodewatch completion zsh > "${fpath[1]}/_nodewatch"`,
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				_, err := fmt.Fprint(e.stdout, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(e.stdout, zshCompletion)
				return err
			}
			return usagef("completion: want bash or zsh, got %q", c.Args().First())
		},
	}
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
compdef _nodewatch nodewatch
`
