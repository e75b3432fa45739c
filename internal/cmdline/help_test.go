package cmdline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestHelpWidth(t *testing.T) {
	for _, c := range []struct{ columns, want int }{{0, 80}, {-1, 80}, {20, 40}, {72, 72}, {80, 80}, {132, 100}} {
		if got := HelpWidth(c.columns); got != c.want {
			t.Errorf("HelpWidth(%d) = %d, want %d", c.columns, got, c.want)
		}
	}
}

func TestWrapWords(t *testing.T) {
	got := wrapWords("comma-separated HOST:PORT[,HOST:PORT…]; a HOST alone means port 7835", 24)
	want := []string{"comma-separated", "HOST:PORT[,HOST:PORT…];", "a HOST alone means port", "7835"}
	if !slices.Equal(got, want) {
		t.Errorf("wrapWords = %q, want %q", got, want)
	}
	if got := wrapWords("", 10); !slices.Equal(got, []string{""}) {
		t.Errorf("wrapWords of nothing = %q", got)
	}
}

func TestCmdLines(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		want  []string
	}{
		{"nodewatch nodes --once", 40, []string{"nodewatch nodes --once"}},
		{`nodewatch key /a /b --until 'length == 2 and all(.value == "on")'`, 40,
			[]string{`nodewatch key /a /b --until \`, `  'length == 2 and all(.value == "on")'`}},
		{`a 'b c d e f g h' "i \" j k" l`, 8, []string{`a \`, `  'b c d e f g h' \`, `  "i \" j k" \`, `  l`}},
	} {
		if got := cmdLines(c.in, c.width); !slices.Equal(got, c.want) {
			t.Errorf("cmdLines(%q, %d)\n got %q\nwant %q", c.in, c.width, got, c.want)
		}
	}
}

func TestDefaultText(t *testing.T) {
	for _, c := range []struct {
		f    cli.DocGenerationFlag
		want string
	}{
		{&cli.BoolFlag{Name: "once"}, ""},
		{&cli.StringFlag{Name: "filter"}, ""},
		{&cli.StringSliceFlag{Name: "arg"}, ""},
		{&cli.StringFlag{Name: "output", Value: "json"}, "json"},
		{&cli.DurationFlag{Name: "timeout"}, "none"},
		{&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second}, "5s"},
		{&cli.IntFlag{Name: "count"}, "none"},
		{&cli.Int64Flag{Name: "rev", DefaultText: "now"}, "now"},
		{&cli.Float64Flag{Name: "rate", Value: 1}, "1"},
	} {
		if got := DefaultText(c.f); got != c.want {
			t.Errorf("DefaultText(--%s) = %q, want %q", c.f.Names()[0], got, c.want)
		}
	}
}

func TestWriteHelp(t *testing.T) {
	app := &cli.App{Name: "tool", Usage: "do things", Commands: []*cli.Command{{
		Name: "run", Usage: "run it", ArgsUsage: "ARG",
		Description: "A paragraph that is long enough to be wrapped\nonce it is joined.\n\nExamples:\n   tool run --a-flag-with-a-long-name x 'quoted words stay together'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "write `FORMAT`"},
			&cli.BoolFlag{Name: "a-flag-with-a-long-name", Usage: "a flag whose name is too long for the column"},
			NewHelpFlag(),
		},
	}}}
	var b strings.Builder
	if err := WriteHelp(&b, 40, app, app.Commands[0], HelpSection{Title: "EXIT CODES", Rows: [][2]string{{"0", "done"}}}); err != nil {
		t.Fatal(err)
	}
	want := `NAME:
   tool run - run it

USAGE:
   tool run [command options] ARG

DESCRIPTION:
   A paragraph that is long enough to be
   wrapped once it is joined.

   Examples:
      tool run \
        --a-flag-with-a-long-name x \
        'quoted words stay together'

OPTIONS:
   --output, -o FORMAT  write FORMAT
                        (default: json)
   --a-flag-with-a-long-name
                        a flag whose
                        name is too long
                        for the column
   --help, -h           show help

EXIT CODES:
   0  done
`
	if got := b.String(); got != want {
		t.Errorf("WriteHelp:\n%s\nwant:\n%s", got, want)
	}
}

// TestHelpFlag: the help flag is a boolean flag that urfave/cli does not
// take for its own (Context.Bool is false), and Asked says it was given.
func TestHelpFlag(t *testing.T) {
	help := NewHelpFlag()
	var asked, seen bool
	app := &cli.App{Name: "tool", HideHelp: true, Flags: []cli.Flag{help}, Action: func(c *cli.Context) error {
		asked, seen = help.Asked(), c.Bool("help") || c.Bool("h")
		return nil
	}}
	if err := app.Run([]string{"tool", "-h", "x"}); err != nil {
		t.Fatal(err)
	}
	if !asked || seen {
		t.Errorf("-h: Asked %v (want true), Context.Bool %v (want false)", asked, seen)
	}
	if k := Kinds([]cli.Flag{help})["help"]; k != Bool {
		t.Errorf("Kinds: --help is %v, want Bool", k)
	}
}
