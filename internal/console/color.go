package console

import "fmt"

// Color is --color: when output may be coloured.
type Color int

const (
	// ColorAuto colours on a terminal, unless NO_COLOR is set (not empty)
	// or TERM is dumb.
	ColorAuto Color = iota
	// ColorAlways colours whatever the output is and the environment says.
	ColorAlways
	// ColorNever never colours.
	ColorNever
)

// Colors are the values of --color, in the order help lists them.
func Colors() []string { return []string{"auto", "always", "never"} }

// ParseColor reads a value of --color.
func ParseColor(s string) (Color, error) {
	switch s {
	case "auto":
		return ColorAuto, nil
	case "always":
		return ColorAlways, nil
	case "never":
		return ColorNever, nil
	}
	return ColorAuto, fmt.Errorf("want auto, always or never, got %q", s)
}

// On reports whether to colour output to a writer that is a terminal or
// not (tty), given the environment (getenv): ColorAuto follows
// https://no-color.org and a terminal that says it cannot (TERM=dumb).
func (c Color) On(tty bool, getenv func(string) string) bool {
	switch c {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// Dumb reports whether the terminal says it cannot move the cursor or
// erase a line (TERM=dumb, as Emacs' shell sets it): no progress meter
// there.
func Dumb(getenv func(string) string) bool { return getenv("TERM") == "dumb" }
