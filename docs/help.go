// Package docs holds nodewatch's documentation that the binary carries:
// the prose of each command's --help (and of the man page), kept as text
// in docs/help/ so that it reads and reviews as text.
package docs

import (
	"embed"
	"strings"
)

//go:embed help/*.txt
var help embed.FS

// Help returns the --help prose of command ("nodewatch" for the program
// itself), without a final newline. It panics if there is none: the
// command line is defined with the files beside it.
func Help(command string) string {
	b, err := help.ReadFile("help/" + command + ".txt")
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}
