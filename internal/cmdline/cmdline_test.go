package cmdline

import (
	"errors"
	"slices"
	"testing"

	"github.com/nodewatch/nodewatch/internal/near"
)

func TestExplain(t *testing.T) {
	flags := map[string]Kind{"filter": String, "timeout": Duration, "count": Int, "once": Bool, "rate": Float, "o": String, "output": String}
	for _, c := range []struct{ in, want string }{
		{"flag provided but not defined: -fitler", "flag provided but not defined: --fitler (did you mean --filter?)"},
		{"flag provided but not defined: -tim", "flag provided but not defined: --tim (did you mean --timeout?)"},
		{"flag provided but not defined: -zzzzzz", "flag provided but not defined: --zzzzzz"},
		{"flag needs an argument: -o", "flag needs an argument: -o"},
		{`invalid value "5" for flag -timeout: parse error`, `invalid value "5" for flag --timeout: a duration needs a unit, e.g. 5s or 5m`},
		{`invalid value "soon" for flag -timeout: parse error`, `invalid value "soon" for flag --timeout: want a duration with a unit, e.g. 30s, 5m or 1h30m`},
		{`invalid value "x" for flag -count: parse error`, `invalid value "x" for flag --count: want a whole number`},
		{`invalid value "x" for flag -rate: parse error`, `invalid value "x" for flag --rate: want a number`},
		{`invalid boolean value "maybe" for -once: parse error`, `invalid value "maybe" for flag --once: want true or false (or the flag alone)`},
		{"something else: -x", "something else: -x"},
	} {
		if got := Explain(errors.New(c.in), flags).Error(); got != c.want {
			t.Errorf("Explain(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	// One-letter flags: any two letters are one edit apart, so only a
	// lookalike or the one long flag of that letter is near.
	top := map[string]Kind{"help": Bool, "h": Bool, "version": Bool}
	watching := map[string]Kind{"help": Bool, "h": Bool, "verbose": Bool, "v": Bool, "output": String, "o": String, "once": Bool}
	for _, c := range []struct {
		in    string
		flags map[string]Kind
		want  string
	}{
		{"flag provided but not defined: -v", top, "flag provided but not defined: -v (did you mean --version?)"},
		{"flag provided but not defined: -V", top, "flag provided but not defined: -V (did you mean --version?)"},
		{"flag provided but not defined: -0", watching, "flag provided but not defined: -0 (did you mean -o?)"},
		{"flag provided but not defined: -O", watching, "flag provided but not defined: -O (did you mean -o?)"},
		{"flag provided but not defined: -x", watching, "flag provided but not defined: -x"},
		{"flag provided but not defined: -w", top, "flag provided but not defined: -w"},
		{"flag provided but not defined: -verbos", watching, "flag provided but not defined: --verbos (did you mean --verbose?)"},
	} {
		if got := Explain(errors.New(c.in), c.flags).Error(); got != c.want {
			t.Errorf("Explain(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"filter", "filter", 0}, {"fitler", "filter", 1}, {"fliter", "filter", 1}, {"filtr", "filter", 1}, {"kitten", "sitting", 3}} {
		if got := near.Distance(c.a, c.b); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := near.Distance(c.b, c.a); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	takes := map[string]bool{"count": true, "prefix": false, "arg": true}
	for _, c := range []struct {
		in, want []string
		err      string
	}{
		{[]string{"/x", "--prefix", "--count", "3"}, []string{"--prefix", "--count", "3", "--", "/x"}, ""},
		{[]string{"--arg", "n", "v", "/x"}, []string{"--arg=n" + ArgSep + "v", "--", "/x"}, ""},
		{[]string{"/x", "--", "--count"}, []string{"--", "/x", "--count"}, ""},
		{[]string{"/x", "--count"}, nil, "flag needs an argument: --count"},
	} {
		got, err := Normalize(c.in, takes)
		if (err != nil || c.err != "") && (err == nil || err.Error() != c.err) {
			t.Errorf("Normalize(%q): error %v, want %q", c.in, err, c.err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNearest(t *testing.T) {
	commands := []string{"nodes", "node", "key", "serve", "sim", "completion", "version", "help"}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"nod", []string{"nodes", "node"}}, {"keys", []string{"key"}}, {"sevre", []string{"serve"}},
		{"ndoes", []string{"nodes"}}, {"watch", nil}, {"x", nil},
	} {
		if got := Nearest(c.in, commands); !slices.Equal(got, c.want) {
			t.Errorf("Nearest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
