// Package completions holds nodewatch's shell completion scripts for
// bash, zsh and fish. Each asks nodewatch itself for the candidates
// (cmdline.Complete: commands, flags, a flag's values, files for a file
// flag), so they never go stale, and nothing connects.
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

// Fish is the fish completion script (`nodewatch completion fish`).
//
//go:embed nodewatch.fish
var Fish string
