// Package enum names the values of small enumerations (the output
// format, a value mode, how a run ended), so that each is written once as
// a table: its String, its parsing from a flag value, the list of names
// an error offers, and the list of its values.
package enum

import (
	"fmt"
	"strings"
)

// Names are the names of the values 0, 1, 2… of an enumeration T; "" for
// a value without a name (such as an invalid zero).
type Names[T ~int] []string

// String returns the name of v, or "Type(v)" for a value without one.
func (n Names[T]) String(v T) string {
	if int(v) >= 0 && int(v) < len(n) && n[v] != "" {
		return n[v]
	}
	return fmt.Sprintf("%T(%d)", v, int(v))
}

// Parse returns the value named s; "" is the first value when allowEmpty.
// The error names what is parsed (e.g. "output format") and offers the
// names.
func (n Names[T]) Parse(what, s string, allowEmpty bool) (T, error) {
	if s == "" && allowEmpty {
		return 0, nil
	}
	for i, name := range n {
		if name != "" && name == s {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want %s)", what, s, n.List())
}

// All returns the names, in order, without the empty ones.
func (n Names[T]) All() []string {
	var names []string
	for _, name := range n {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// Values returns the values that have a name, in order.
func (n Names[T]) Values() []T {
	var vs []T
	for i, name := range n {
		if name != "" {
			vs = append(vs, T(i))
		}
	}
	return vs
}

// List returns the names as a message offers them: "a, b or c".
func (n Names[T]) List() string {
	names := n.All()
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
