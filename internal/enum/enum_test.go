package enum

import (
	"slices"
	"testing"
)

type color int

func TestNames(t *testing.T) {
	names := Names[color]{"", "red", "green", "blue"}
	for i, n := range names[1:] {
		c, err := names.Parse("color", n, false)
		if err != nil || c != color(i+1) || names.String(c) != n {
			t.Errorf("Parse(%q) = %d, %v; String = %q", n, c, err, names.String(c))
		}
	}
	if got := names.String(0); got != "enum.color(0)" {
		t.Errorf("String(0) = %q, want a name for a value without one", got)
	}
	if got := names.String(9); got != "enum.color(9)" {
		t.Errorf("String(9) = %q", got)
	}
	if _, err := names.Parse("color", "", false); err == nil || err.Error() != `unknown color "" (want red, green or blue)` {
		t.Errorf("Parse(\"\") = %v", err)
	}
	if c, err := names.Parse("color", "", true); c != 0 || err != nil {
		t.Errorf("Parse(\"\", allowEmpty) = %d, %v", c, err)
	}
	if _, err := (Names[color]{"a", "b"}).Parse("mode", "c", false); err == nil || err.Error() != `unknown mode "c" (want a or b)` {
		t.Errorf("error = %v", err)
	}
	if got := names.Values(); !slices.Equal(got, []color{1, 2, 3}) {
		t.Errorf("Values = %v, want the named ones", got)
	}
}
