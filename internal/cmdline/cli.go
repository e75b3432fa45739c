package cmdline

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/jq"
)

// Kinds says what each of flags takes, by every name it has.
func Kinds(flags []cli.Flag) map[string]Kind {
	kinds := map[string]Kind{}
	for _, f := range flags {
		k := String
		switch f.(type) {
		case *cli.BoolFlag, *HelpFlag:
			k = Bool
		case *cli.DurationFlag:
			k = Duration
		case *cli.IntFlag, *cli.Int64Flag:
			k = Int
		case *cli.Float64Flag:
			k = Float
		}
		for _, n := range f.Names() {
			kinds[n] = k
		}
	}
	return kinds
}

// Args rewrites a command line (without the program's name) into the
// shape urfave/cli parses (Normalize), given the flags of the command of
// app it names.
func Args(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	cmd := app.Command(args[0])
	if cmd == nil {
		return args, nil
	}
	takesValue := map[string]bool{}
	for name, k := range Kinds(cmd.Flags) {
		takesValue[name] = k != Bool
	}
	rest, err := Normalize(args[1:], takesValue)
	if err != nil {
		return nil, err
	}
	return append(args[:1:1], rest...), nil
}

// OnUsageError explains an error of the flag parser (Explain) with the
// flags of the command that c runs, and hands it to wrap.
func OnUsageError(wrap func(error) error) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, _ bool) error {
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != "" {
			flags = c.Command.Flags
		}
		return wrap(Explain(err, Kinds(flags)))
	}
}

// JQVars reads jq's --arg NAME VALUE and --argjson NAME JSON (each joined
// by ArgSep) from c.
func JQVars(c *cli.Context) (jq.Vars, error) {
	var vars jq.Vars
	for _, flag := range []string{"arg", "argjson"} {
		for _, a := range c.StringSlice(flag) {
			name, value, ok := strings.Cut(a, ArgSep)
			switch {
			case !ok && flag == "arg":
				return vars, fmt.Errorf("--arg: want NAME VALUE, got %q", a)
			case !ok:
				return vars, fmt.Errorf("--argjson: want NAME JSON, got %q", a)
			case flag == "arg":
				vars.Add(name, value)
			default:
				if err := vars.AddJSON(name, value); err != nil {
					return vars, fmt.Errorf("--argjson %s: %w", name, err)
				}
			}
		}
	}
	return vars, nil
}

// List splits a comma-separated flag value, dropping empty items.
func List(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
