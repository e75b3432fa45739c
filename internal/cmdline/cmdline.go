// Package cmdline turns a command line as a user types it into the shape
// the flag parser (urfave/cli, over Go's flag package) takes, and the
// parser's errors back into the words the user typed.
package cmdline

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/nodewatch/nodewatch/internal/near"
)

// Kind is what a flag takes, as messages describe it.
type Kind int

const (
	String Kind = iota
	Bool
	Int
	Float
	Duration
)

// Errors of Go's flag package, with the flag named as it names it: with
// one dash, whatever the user typed.
var (
	undefined   = regexp.MustCompile(`^flag provided but not defined: -+([A-Za-z0-9][A-Za-z0-9-]*)$`)
	noArgument  = regexp.MustCompile(`^flag needs an argument: -+([A-Za-z0-9][A-Za-z0-9-]*)$`)
	badValue    = regexp.MustCompile(`^invalid value ("[^"]*") for flag -+([A-Za-z0-9][A-Za-z0-9-]*): .*$`)
	badBoolean  = regexp.MustCompile(`^invalid boolean value ("[^"]*") for -+([A-Za-z0-9][A-Za-z0-9-]*): .*$`)
	numberAlone = regexp.MustCompile(`^"[0-9]+(\.[0-9]+)?"$`)
)

// Explain rewrites an error of the flag parser into the words the user
// typed and what to type instead, given the kinds of the command's flags
// (by every name): the flag as --name (one-letter flags keep one dash),
// what a value that does not parse should look like (a duration needs a
// unit), and the closest flag to one that does not exist. Other errors
// pass unchanged.
func Explain(err error, flags map[string]Kind) error {
	msg := err.Error()
	if m := undefined.FindStringSubmatch(msg); m != nil {
		msg = "flag provided but not defined: " + dashed(m[1])
		if near := closest(m[1], flags); near != "" {
			msg += " (did you mean " + dashed(near) + "?)"
		}
	} else if m := noArgument.FindStringSubmatch(msg); m != nil {
		msg = "flag needs an argument: " + dashed(m[1])
	} else if m := badValue.FindStringSubmatch(msg); m != nil {
		msg = "invalid value " + m[1] + " for flag " + dashed(m[2]) + ": " + want(flags[m[2]], m[1])
	} else if m := badBoolean.FindStringSubmatch(msg); m != nil {
		msg = "invalid value " + m[1] + " for flag " + dashed(m[2]) + ": want true or false (or the flag alone)"
	} else {
		return err
	}
	return errors.New(msg)
}

// want says what a flag of kind k takes, for the value quoted that it
// did not take.
func want(k Kind, quoted string) string {
	switch k {
	case Duration:
		if numberAlone.MatchString(quoted) {
			n := strings.Trim(quoted, `"`)
			return "a duration needs a unit, e.g. " + n + "s or " + n + "m"
		}
		return "want a duration with a unit, e.g. 30s, 5m or 1h30m"
	case Int:
		return "want a whole number"
	case Float:
		return "want a number"
	}
	return "cannot be parsed"
}

// dashed is a flag's name as the user types it.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// closest returns the flag nearest to name, "" when none is near. A
// one-letter name is near only a flag that looks the same (-0 and -o, -O
// and -o) or, failing that, the one long flag that starts with its
// letter, in either case (-v, -V: --version where there is no -v): any two letters are one
// edit apart, and -v is no typo of -h. A longer name is near the long
// flags at most two edits away, or that it starts (Nearest).
func closest(name string, flags map[string]Kind) string {
	var short, long []string
	for f := range flags {
		if len(f) == 1 {
			short = append(short, f)
		} else {
			long = append(long, f)
		}
	}
	slices.Sort(long)
	if len(name) == 1 {
		for _, f := range short {
			if lookalike(name[0], f[0]) {
				return f
			}
		}
		var starting []string
		for _, f := range long {
			if lower(f[0]) == lower(name[0]) {
				starting = append(starting, f)
			}
		}
		if len(starting) == 1 {
			return starting[0]
		}
		return ""
	}
	if near := Nearest(name, long); len(near) > 0 {
		return near[0]
	}
	return ""
}

// lower is the letter c in lower case.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lookalike reports whether the flag letters a and b are easily typed or
// read for each other: the same letter in another case, a digit and the
// letter it looks like.
func lookalike(a, b byte) bool {
	if a == b {
		return false
	}
	same := map[byte]byte{'0': 'o', '1': 'l', '5': 's', '8': 'b'}
	a, b = lower(a), lower(b)
	return a == b || same[a] == b || same[b] == a
}

// Nearest returns the names (of commands, of flags without dashes) nearest
// to name, in their order: at most two edits away, or one edit for names
// that name starts (with three letters at least: "nod" for "nodes"); nil
// when none is near.
func Nearest(name string, names []string) []string {
	var best []string
	bestD := 3
	for _, n := range names {
		d := near.Distance(name, n)
		if len(n) > 1 && len(name) >= 3 && strings.HasPrefix(n, name) {
			d = min(d, 1)
		}
		switch {
		case d < bestD:
			best, bestD = []string{n}, d
		case d == bestD && best != nil:
			best = append(best, n)
		}
	}
	return best
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
func Normalize(rest []string, takesValue map[string]bool) ([]string, error) {
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
		case takesValue[name] && !hasValue:
			// Last, without its value: the parser would take the "--"
			// put before the positional arguments for it.
			return nil, errors.New("flag needs an argument: " + dashed(name))
		default:
			flags = append(flags, a)
		}
	}
	out := flags
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, nil
}
