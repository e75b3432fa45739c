package jq

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPaths(t *testing.T) {
	for _, c := range []struct {
		expr string
		want [][]string
	}{
		{`.stat`, [][]string{{"stat"}}},
		{`.state == "NODE_STATE_UP"`, [][]string{{"state"}}},
		{`.status.external_address`, [][]string{{"status", "external_address"}}},
		{`.state == "UP" and .status.external_address != null`, [][]string{{"state"}, {"status", "external_address"}}},
		{`.state == "UP" or .state == "NEW"`, [][]string{{"state"}}},
		{`."state" == "UP"`, [][]string{{"state"}}},
		{`.["with space"]`, [][]string{{"with space"}}},
		{`.a[0].b`, [][]string{{"a"}}},
		{`.["a"].b`, [][]string{{"a", "b"}}},
		{`.[0]`, nil},
		{`.a[].b`, [][]string{{"a"}}},
		{`.a? // "x"`, [][]string{{"a"}}},
		{`.value | .stat`, [][]string{{"value"}}},
		{`(.a | .b) == 1`, [][]string{{"a"}}},
		{`not`, nil},
		{`select(.a == 1)`, [][]string{{"a"}}},
		{`if .a then .b else .c end`, [][]string{{"a"}, {"b"}, {"c"}}},
		{`try .a catch .b`, [][]string{{"a"}}},
		{`map(.x)`, nil},
		{`any(.roles[]; .x)`, nil},
		{`.a as $x | .b`, [][]string{{"a"}}},
		{`def f: .z; f`, nil},
		{`.a |= 1`, nil},
		{`-.n > 1`, [][]string{{"n"}}},
		{`length > 0`, nil},
		{`.`, nil},
	} {
		p, err := Compile("--filter", c.expr, Vars{})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if diff := cmp.Diff(c.want, p.Paths()); diff != "" {
			t.Errorf("Paths of %s (-want +got):\n%s", c.expr, diff)
		}
		if p.Expr() != c.expr {
			t.Errorf("Expr() = %q, want %q", p.Expr(), c.expr)
		}
	}
}
