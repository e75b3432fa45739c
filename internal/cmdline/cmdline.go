// Package cmdline turns a command line as a user types it into the shape
// the flag parser (urfave/cli, over Go's flag package) takes, and the
// parser's errors back into the words the user typed.
package cmdline

import (
	"errors"
	"regexp"
	"strings"
)

// flagInMessage is a flag as Go's flag package names it in its errors:
// with one dash, whatever the user typed.
var flagInMessage = regexp.MustCompile(`(not defined|needs an argument|invalid value "[^"]*" for flag|invalid boolean value "[^"]*" for): -([a-z][a-z-]+)`)

// LongFlags rewrites the flag package's "-name" into "--name", as the
// user typed it and as --help lists it (one-letter flags keep one dash).
func LongFlags(err error) error {
	msg := flagInMessage.ReplaceAllString(err.Error(), "$1: --$2")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// ArgSep joins NAME and VALUE of --arg/--argjson into one flag value; NUL
// cannot occur in a command-line argument, so it cannot be ambiguous.
const ArgSep = "\x00"

// Normalize rewrites the arguments of a command (after its name):
//   - jq's two-value `--arg NAME VALUE` becomes `--arg=NAME<NUL>VALUE`
//     (ArgSep);
//   - flags after positional arguments move before them, so that
//     `nodewatch key /x --prefix` works as etcdctl users expect.
//
// takesValue says which flag names take a value. Everything after `--`
// stays positional.
func Normalize(rest []string, takesValue map[string]bool) []string {
	var flags, positional []string
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
			flags = append(flags, "--"+name+"="+rest[i+1]+ArgSep+rest[i+2])
			i += 2
		case takesValue[name] && !hasValue && i+1 < len(rest):
			flags = append(flags, a, rest[i+1])
			i++
		default:
			flags = append(flags, a)
		}
	}
	out := flags
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}
