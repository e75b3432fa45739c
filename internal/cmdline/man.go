package cmdline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// ManSection is a section of a man page after the commands': a title
// ("EXIT STATUS") and its text (see Man).
type ManSection struct {
	Title, Text string
}

// Man writes the man page (section 1) of app from the definitions its
// --help is made of: NAME, SYNOPSIS, DESCRIPTION (the app's Description),
// a section per visible command (its usage line, description, examples
// and flags as they are typed: --arg NAME VALUE, -o FORMAT, with default
// and variable), then sections.
//
// Texts are plain: paragraphs are separated by blank lines; a line that
// ends with ':' and is followed by indented lines ("Examples:") heads a
// block shown as typed; in a section's text, a line that is not indented
// followed by indented ones is a tagged paragraph (a term and what it
// means).
func Man(app *cli.App, sections ...ManSection) string {
	var b strings.Builder
	name := app.Name
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"%s\" \"User Commands\"\n", strings.ToUpper(name), name)
	b.WriteString(".nh\n.ad l\n") // no hyphens in flags and names; ragged right
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", name, roff(app.Usage))
	b.WriteString(".SH SYNOPSIS\n")
	commands := slices.DeleteFunc(slices.Clone(app.Commands), func(c *cli.Command) bool { return c.Hidden })
	for _, c := range commands {
		fmt.Fprintf(&b, ".B %s %s\n", name, c.Name)
		if len(visibleFlags(c.Flags)) > 0 {
			b.WriteString("[\\fIoptions\\fR]\n")
		}
		if c.ArgsUsage != "" {
			fmt.Fprintf(&b, "\\fI%s\\fR\n", roff(c.ArgsUsage))
		}
		b.WriteString(".br\n")
	}
	b.WriteString(".SH DESCRIPTION\n")
	text(&b, app.Description, false)
	for _, c := range commands {
		fmt.Fprintf(&b, ".SH \"%s %s\"\n", strings.ToUpper(name), strings.ToUpper(c.Name))
		fmt.Fprintf(&b, "\\fB%s %s\\fR", name, c.Name)
		if c.ArgsUsage != "" {
			fmt.Fprintf(&b, " \\fI%s\\fR", roff(c.ArgsUsage))
		}
		fmt.Fprintf(&b, ": %s.\n", roff(c.Usage))
		if c.Description != "" {
			b.WriteString(".PP\n")
			text(&b, c.Description, false)
		}
		if flags := visibleFlags(c.Flags); len(flags) > 0 {
			b.WriteString(".PP\nOptions:\n")
			for _, f := range flags {
				manFlag(&b, f)
			}
		}
	}
	for _, s := range sections {
		fmt.Fprintf(&b, ".SH %s\n", s.Title)
		text(&b, s.Text, true)
	}
	return b.String()
}

// visibleFlags are the flags a man page lists: not hidden, not --help
// (the page says it once).
func visibleFlags(flags []cli.Flag) []cli.DocGenerationFlag {
	var out []cli.DocGenerationFlag
	for _, f := range flags {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok || !visible(f) || slices.Contains(f.Names(), "help") {
			continue
		}
		out = append(out, df)
	}
	slices.SortFunc(out, func(a, b cli.DocGenerationFlag) int { return strings.Compare(a.Names()[0], b.Names()[0]) })
	return out
}

// manFlag writes f as a tagged paragraph: its names as typed, with the
// placeholder of its value, then what it does (as --help says it).
func manFlag(b *strings.Builder, f cli.DocGenerationFlag) {
	var names []string
	for _, n := range f.Names() {
		names = append(names, "\\fB"+roff(dashed(n))+"\\fR")
	}
	b.WriteString(".TP\n" + strings.Join(names, ", "))
	if f.TakesValue() {
		b.WriteString(" \\fI" + roff(placeholder(f)) + "\\fR")
	}
	b.WriteString("\n" + roff(flagText(f)) + "\n")
}

// text writes plain text as roff (see Man); tagged: unindented lines
// followed by indented ones are tagged paragraphs.
func text(b *strings.Builder, s string, tagged bool) {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	indented := func(i int) bool { return i < len(lines) && strings.HasPrefix(lines[i], " ") }
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			b.WriteString(".PP\n")
		case tagged && !indented(i) && indented(i+1):
			b.WriteString(".TP\n\\fB" + roff(l) + "\\fR\n")
			for ; indented(i + 1); i++ {
				b.WriteString(roff(strings.TrimSpace(lines[i+1])) + "\n")
			}
		case strings.HasSuffix(l, ":") && indented(i+1):
			b.WriteString(roff(l) + "\n.PP\n.RS 4\n.nf\n")
			for ; indented(i + 1); i++ {
				b.WriteString(roff(strings.TrimSpace(lines[i+1])) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
		default:
			b.WriteString(roff(l) + "\n")
		}
	}
}

// roff escapes text for roff: backslashes, hyphen-minus (so that flags
// copy as typed), the ellipsis (not ASCII), the backquote (a grave accent,
// not an opening quote), and a leading dot or quote.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`, "…", `\[u2026]`, "`", `\(ga`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
