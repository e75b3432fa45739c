package cmdline

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// Widths of --help. Help is wrapped to the terminal's width, but not
// wider than MaxHelpWidth (prose wider than that reads badly: clap stops
// at 100 too) nor narrower than MinHelpWidth; DefaultHelpWidth is the
// width when stdout is not a terminal.
const (
	DefaultHelpWidth = 80
	MinHelpWidth     = 40
	MaxHelpWidth     = 100
)

// HelpWidth is the width help is wrapped to on a terminal of width
// columns (0: not a terminal).
func HelpWidth(columns int) int {
	if columns <= 0 {
		return DefaultHelpWidth
	}
	return min(max(columns, MinHelpWidth), MaxHelpWidth)
}

// ErrHelpShown ends a run that printed help instead of running: it is no
// failure (exit 0).
var ErrHelpShown = errors.New("help shown")

// HelpFlag is the --help, -h flag of one command of one run. urfave/cli
// does not take it for its own help flag (its value does not read as a
// boolean to cli.Context.Bool), so that urfave/cli's help printer, a
// package-level variable, never runs: the command asks Asked and prints
// help itself (WriteHelp) at the width of the run's terminal. A value per
// run also keeps runs in one process (the tests) from sharing one.
type HelpFlag struct {
	cli.BoolFlag
	asked bool
}

// NewHelpFlag returns a --help, -h flag that was not given.
func NewHelpFlag() *HelpFlag {
	return &HelpFlag{BoolFlag: cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}}
}

// Apply defines the flag's names in set.
func (f *HelpFlag) Apply(set *flag.FlagSet) error {
	for _, n := range f.Names() {
		set.Var(helpValue{&f.asked}, n, f.Usage)
	}
	return nil
}

// Asked reports whether the command line asked for help.
func (f *HelpFlag) Asked() bool { return f.asked }

// helpValue is a boolean flag.Value whose String is no boolean (see
// HelpFlag).
type helpValue struct{ asked *bool }

func (v helpValue) String() string   { return "" }
func (v helpValue) IsBoolFlag() bool { return true }
func (v helpValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err == nil {
		*v.asked = b
	}
	return err
}

// HelpSection is a section of --help after the flags: a title and rows,
// each a term and what it means (EXIT CODES: a code and its meaning).
type HelpSection struct {
	Title string
	Rows  [][2]string
}

// Help column widths: the text is indented by helpIndent; a term longer
// than helpTermMax gets a line of its own, its text below it, so that the
// column of texts never starts further right than helpIndent+helpTermMax+2.
const (
	helpIndent  = 3
	helpTermMax = 24
)

// WriteHelp writes the --help of app (cmd nil) or of its command cmd,
// wrapped to width columns between words: NAME, USAGE, DESCRIPTION (its
// paragraphs reflowed; indented lines kept, and a long one broken between
// shell words with a trailing \), COMMANDS, OPTIONS (each flag as typed,
// then its usage, default and variable), then sections.
func WriteHelp(w io.Writer, width int, app *cli.App, cmd *cli.Command, sections ...HelpSection) error {
	var b strings.Builder
	name, usage, args, description, flags := app.Name, app.Usage, "", app.Description, app.Flags
	usageLine := app.Name + " [global options] command [command options]"
	if cmd != nil {
		name, usage, args, description, flags = app.Name+" "+cmd.Name, cmd.Usage, cmd.ArgsUsage, cmd.Description, cmd.Flags
		usageLine = name + " [command options]"
		if args != "" {
			usageLine += " " + args
		}
	}
	b.WriteString("NAME:\n")
	paragraph(&b, width, helpIndent, name+" - "+usage)
	b.WriteString("\nUSAGE:\n")
	paragraph(&b, width, helpIndent, usageLine)
	if description != "" {
		b.WriteString("\nDESCRIPTION:\n")
		prose(&b, width, description)
	}
	if cmd == nil {
		var commands [][2]string
		for _, c := range app.Commands {
			if !c.Hidden {
				commands = append(commands, [2]string{c.Name, c.Usage})
			}
		}
		if len(commands) > 0 {
			b.WriteString("\nCOMMANDS:\n")
			rows(&b, width, commands, helpTermMax)
		}
	}
	var options [][2]string
	for _, f := range flags {
		if df, ok := f.(cli.DocGenerationFlag); ok && visible(f) {
			options = append(options, [2]string{flagTerm(df), flagText(df)})
		}
	}
	if len(options) > 0 {
		if cmd == nil {
			b.WriteString("\nGLOBAL OPTIONS:\n")
		} else {
			b.WriteString("\nOPTIONS:\n")
		}
		rows(&b, width, options, helpTermMax)
	}
	for _, s := range sections {
		if len(s.Rows) > 0 {
			b.WriteString("\n" + s.Title + ":\n")
			rows(&b, width, s.Rows, helpTermMax)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// flagTerm is f as it is typed: its names, then the placeholder of its
// value ("--output, -o FORMAT").
func flagTerm(f cli.DocGenerationFlag) string {
	var names []string
	for _, n := range f.Names() {
		names = append(names, dashed(n))
	}
	term := strings.Join(names, ", ")
	if f.TakesValue() {
		term += " " + placeholder(f)
	}
	return term
}

// placeholder is the name of f's value: the first words of its usage in
// backquotes, VALUE if none.
func placeholder(f cli.DocGenerationFlag) string {
	p, _ := unquote(f.GetUsage())
	if p == "" {
		p = "VALUE"
	}
	return p
}

// flagText is what f does: its usage (its placeholder's backquotes
// removed), whether it may be repeated, its default (DefaultText) and the
// variable it reads.
func flagText(f cli.DocGenerationFlag) string {
	_, text := unquote(f.GetUsage())
	if repeatable(f) && !strings.Contains(text, "repeatable") {
		text += " (repeatable)"
	}
	if d := DefaultText(f); d != "" {
		text += " (default: " + d + ")"
	}
	if env := f.GetEnvVars(); len(env) > 0 {
		text += " [$" + strings.Join(env, ", $") + "]"
	}
	return text
}

// unquote returns the words of usage in its first pair of backquotes,
// and usage without that pair, as urfave/cli reads a flag's usage.
func unquote(usage string) (name, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}

// repeatable reports whether f may be given more than once.
func repeatable(f cli.Flag) bool {
	switch f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag:
		return true
	}
	return false
}

// DefaultText is f's default as --help and the man page write it, the
// same way for every flag: "" (none written) for a flag that takes no
// value and for an empty text or list; "none" for a number or duration
// that is zero, which means no limit or nothing set; the flag's own
// DefaultText if it has one; else the value, unquoted.
func DefaultText(f cli.DocGenerationFlag) string {
	if !f.TakesValue() {
		return ""
	}
	switch d := f.GetDefaultText(); d {
	case "", `""`, "[]":
		return ""
	case "0", "0s":
		return "none"
	default:
		return strings.Trim(d, `"`)
	}
}

// rows writes rows of a term and its text: the texts in a column after
// the longest term not longer than termMax, wrapped to width; a longer
// term has a line of its own, with its text below it in the column.
func rows(b *strings.Builder, width int, rs [][2]string, termMax int) {
	col := 0
	for _, r := range rs {
		if n := utf8.RuneCountInString(r[0]); n > col && (termMax == 0 || n <= termMax) {
			col = n
		}
	}
	textCol := helpIndent + col + 2
	pad := strings.Repeat(" ", textCol)
	for _, r := range rs {
		lines := wrapWords(r[1], width-textCol)
		b.WriteString(strings.Repeat(" ", helpIndent) + r[0])
		if n := utf8.RuneCountInString(r[0]); n > col {
			b.WriteString("\n" + pad)
		} else {
			b.WriteString(strings.Repeat(" ", col-n+2))
		}
		b.WriteString(strings.Join(lines, "\n"+pad) + "\n")
	}
}

// prose writes text (paragraphs separated by blank lines, as in
// docs/help) indented by helpIndent: its paragraphs (lines not indented)
// reflowed to width, its indented lines as they are, but broken between
// shell words (cmdLines) when they are too long.
func prose(b *strings.Builder, width int, text string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			b.WriteString("\n")
		case strings.HasPrefix(l, " "):
			indent := helpIndent + len(l) - len(strings.TrimLeft(l, " "))
			for _, part := range cmdLines(strings.TrimSpace(l), width-indent) {
				b.WriteString(strings.Repeat(" ", indent) + part + "\n")
			}
		default:
			p := l
			for ; i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !strings.HasPrefix(lines[i+1], " "); i++ {
				p += " " + lines[i+1]
			}
			paragraph(b, width, helpIndent, p)
		}
	}
}

// paragraph writes text wrapped to width, each line indented by indent.
func paragraph(b *strings.Builder, width, indent int, text string) {
	pad := strings.Repeat(" ", indent)
	for _, l := range wrapWords(text, width-indent) {
		b.WriteString(pad + l + "\n")
	}
}

// wrapWords breaks text into lines of at most width characters, between
// words; a word longer than width has a line of its own.
func wrapWords(text string, width int) []string {
	var lines []string
	line, n := "", 0
	for _, w := range strings.Fields(text) {
		wn := utf8.RuneCountInString(w)
		switch {
		case n == 0:
			line, n = w, wn
		case n+1+wn > width:
			lines = append(lines, line)
			line, n = w, wn
		default:
			line, n = line+" "+w, n+1+wn
		}
	}
	if n > 0 || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

// cmdLines breaks a command line longer than width into lines that end
// with " \" (as a shell continues them), each after the first indented
// by two more spaces, between words outside quotes. What cannot be broken
// stays long.
func cmdLines(cmd string, width int) []string {
	var out []string
	for prefix := ""; ; prefix = "  " {
		if utf8.RuneCountInString(prefix+cmd) <= width {
			return append(out, prefix+cmd)
		}
		spaces := wordBreaks(cmd)
		cut := -1
		for _, s := range spaces {
			if utf8.RuneCountInString(prefix+cmd[:s]+" \\") <= width || cut < 0 {
				cut = s
			}
		}
		if cut < 0 {
			return append(out, prefix+cmd)
		}
		out = append(out, prefix+cmd[:cut]+" \\")
		cmd = strings.TrimLeft(cmd[cut:], " ")
	}
}

// wordBreaks returns the positions of the spaces of cmd that separate
// shell words: outside '…' and "…".
func wordBreaks(cmd string) []int {
	var out []int
	var quote byte
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == ' ' && i > 0 && cmd[i-1] != ' ':
			out = append(out, i)
		}
	}
	return slices.Compact(out)
}
