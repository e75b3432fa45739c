package cmdline

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// CompleteCommand is the first argument of a completion request: the
// shell scripts run `nodewatch __complete WORDS… CUR`, with the words
// before the cursor and the word at it (CUR, maybe empty).
const CompleteCommand = "__complete"

// LegacyCompleteFlag is the last argument of a completion request from
// the scripts of urfave/cli and of nodewatch before CompleteCommand:
// `nodewatch WORDS… [CUR] --generate-bash-completion`, where CUR is
// there only when it starts with "-".
const LegacyCompleteFlag = "--generate-bash-completion"

// Files is the answer that asks the shell to complete file names.
const Files = ":files"

// Complete returns the candidates for the word cur of a command line of
// app, after the words before it (without the program's name): commands,
// a command's flags (for a word that starts with -), the values of the
// flag before it (values, by flag name; Files for a flag that takes a
// file; none for a free value) and the alternatives of an ArgsUsage such
// as "bash|zsh|fish". It only reads the definition: nothing runs.
func Complete(app *cli.App, before []string, cur string, values map[string][]string) []string {
	var cmd *cli.Command
	for _, w := range before {
		if c := app.Command(w); c != nil {
			cmd = c
			break
		}
	}
	if cmd == nil {
		var names []string
		for _, c := range app.Commands {
			if !c.Hidden {
				names = append(names, c.Name)
			}
		}
		return matching(names, cur)
	}
	if slices.Contains(before, "--") {
		return nil // after --, every word is an argument
	}
	// A value: after a flag that takes one (bash splits --flag=value
	// into --flag, = and value), or in --flag=value.
	prev := ""
	if n := len(before); n > 0 {
		prev = before[n-1]
		if prev == "=" && n > 1 {
			prev = before[n-2]
		}
	}
	prefix := ""
	if name, value, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "-") {
		prev, prefix, cur = name, name+"=", value
	}
	if f := flagNamed(cmd.Flags, prev); f != nil && takesValue(f) {
		if takesFile(f) {
			return []string{Files}
		}
		var out []string
		for _, v := range matching(values[f.Names()[0]], cur) {
			out = append(out, prefix+v)
		}
		return out
	}
	if strings.HasPrefix(cur, "-") {
		var names []string
		for _, f := range cmd.Flags {
			if !visible(f) {
				continue
			}
			for _, n := range f.Names() {
				names = append(names, dashed(n))
			}
		}
		return matching(names, cur)
	}
	if alts := strings.Split(cmd.ArgsUsage, "|"); len(alts) > 1 && !strings.ContainsAny(cmd.ArgsUsage, " []") {
		return matching(alts, cur)
	}
	return nil
}

// flagNamed returns the flag of flags that arg (-o, --output) names.
func flagNamed(flags []cli.Flag, arg string) cli.Flag {
	if !strings.HasPrefix(arg, "-") {
		return nil
	}
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func takesFile(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.TakesFile
	case *cli.StringSliceFlag:
		return f.TakesFile
	case *cli.PathFlag:
		return f.TakesFile
	}
	return false
}

// visible reports whether f is listed (in --help, the man page,
// completion): it is not hidden.
func visible(f cli.Flag) bool {
	vf, ok := f.(cli.VisibleFlag)
	return !ok || vf.IsVisible()
}

func takesValue(f cli.Flag) bool {
	df, ok := f.(cli.DocGenerationFlag)
	return ok && df.TakesValue()
}

// matching returns the words that start with prefix.
func matching(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}
