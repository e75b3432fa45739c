package watchflags

import (
	"context"
	"fmt"
	"strings"

	"github.com/itchyny/gojq"
	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/stream"
)

// columnsFlag is -o table's --columns.
func columnsFlag() cli.Flag {
	return &cli.StringFlag{Name: "columns", Usage: "with -o table: the columns, `NAME=EXPR,…` (EXPR jq over each object; a bare age: how long it has been there), instead of the command's"}
}

// columnName reports whether n may name a column: a word, as a header
// shows it.
func columnName(n string) bool {
	return n != "" && !strings.ContainsFunc(n, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_.-", r))
	})
}

// ParseColumns sets the columns of -o table from --columns, or from
// defaults (the command's, in the same form) when it is not given. It
// fails, with a usage error naming --columns, on an expression that
// does not compile, and on --columns without -o table.
func (o *Options) ParseColumns(c *cli.Context, defaults string) error {
	spec, name := defaults, "the default columns"
	if c.IsSet("columns") {
		if o.Output.Format != stream.Table {
			return cmdline.Usagef("--columns: only with -o table")
		}
		spec, name = c.String("columns"), "--columns"
	}
	if o.Output.Format != stream.Table {
		return nil
	}
	vars, err := cmdline.JQVars(c)
	if err != nil {
		return cmdline.Usage(err)
	}
	cols, err := Columns(name, spec, vars)
	if err != nil {
		return cmdline.Usage(err)
	}
	o.Output.Columns = cols
	return nil
}

// Columns compiles spec, columns as NAME=EXPR separated by commas (those
// outside parentheses, brackets, braces and strings: `roles=.roles |
// keys | join(",")` is one column), or the bare name age. name is what
// messages call spec.
func Columns(name, spec string, vars jq.Vars) ([]stream.Column, error) {
	var cols []stream.Column
	for _, item := range splitTop(spec) {
		item = strings.TrimSpace(item)
		n, expr, ok := strings.Cut(item, "=")
		n = strings.TrimSpace(n)
		switch {
		case item == "":
			return nil, fmt.Errorf("%s: an empty column in %q", name, spec)
		case !ok && n == "age":
			cols = append(cols, stream.Column{Name: n, Age: true})
			continue
		case !ok:
			return nil, fmt.Errorf("%s: want NAME=EXPR, got %q", name, item)
		case !columnName(n):
			return nil, fmt.Errorf("%s: a column's name is letters, digits, _ . or -, got %q", name, n)
		case strings.TrimSpace(expr) == "":
			return nil, fmt.Errorf("%s: column %s: an empty expression", name, n)
		}
		prog, err := jq.Compile(name, expr, vars)
		if err != nil {
			return nil, err
		}
		cols = append(cols, stream.Column{Name: n, Value: cell(prog)})
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s: no columns", name)
	}
	return cols, nil
}

// cell returns what a table's cell shows of prog's outputs for an object:
// a string as it is, anything else as compact JSON, several joined by
// ","; null, or no output, as <none> (as kubectl shows it); an error as
// <error>. The evaluation is bounded by the program's own time limit
// (jq.DefaultEvalTimeout): a cell is made while a batch is printed, and
// the run ends after that batch.
func cell(prog *jq.Program) func(obj any) string {
	return func(obj any) string {
		out, err := prog.Run(context.Background(), jsondoc.TreeOf(obj))
		if err != nil {
			return "<error>"
		}
		var parts []string
		for _, v := range out {
			switch v := v.(type) {
			case nil:
			case string:
				parts = append(parts, v)
			default:
				b, _ := gojq.Marshal(v) // never fails for jq's values
				parts = append(parts, string(b))
			}
		}
		if len(parts) == 0 {
			return "<none>"
		}
		return strings.Join(parts, ",")
	}
}

// splitTop splits s at its commas that are outside parentheses, brackets,
// braces and jq strings (a string's \(…) being code again).
func splitTop(s string) []string {
	var (
		parts []string
		open  []byte // the brackets and strings s is inside, innermost last
		start int
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if len(open) > 0 && open[len(open)-1] == '"' {
			switch {
			case c == '\\' && i+1 < len(s) && s[i+1] == '(':
				open = append(open, '(')
				i++
			case c == '\\':
				i++
			case c == '"':
				open = open[:len(open)-1]
			}
			continue
		}
		switch c {
		case '"', '(', '[', '{':
			open = append(open, c)
		case ')', ']', '}':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case ',':
			if len(open) == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
