// Package completions holds nodewatch's shell completion scripts. The
// bash and zsh scripts are written here by hand and ask nodewatch itself
// for candidates, so they never go stale; the fish script is generated
// from the command-line definition (`make generate`).
package completions

import _ "embed"

// Bash is the bash completion script (`nodewatch completion bash`).
//
//go:embed nodewatch.bash
var Bash string

// Zsh is the zsh completion script (`nodewatch completion zsh`), as an
// autoloaded _nodewatch or sourced.
//
//go:embed _nodewatch
var Zsh string
