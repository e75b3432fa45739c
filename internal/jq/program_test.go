package jq

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustCompile(t *testing.T, expr string, vars Vars) *Program {
	t.Helper()
	p, err := Compile("--filter", expr, vars)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		expr       string
		wantOffset int
		wantMsg    string
	}{
		{".a | )", 6, `--filter: unexpected token ")" at position 6: .a | )`},
		{"{", 1, "--filter: unexpected EOF at position 1: {"},
		{"undefined_fn", -1, "--filter: function not defined: undefined_fn/0: undefined_fn"},
		{"$x", -1, "--filter: variable not defined: $x: $x"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Compile("--filter", tt.expr, Vars{})
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CompileError", err)
			}
			if ce.Offset != tt.wantOffset || err.Error() != tt.wantMsg {
				t.Errorf("got offset %d, %q; want %d, %q", ce.Offset, err, tt.wantOffset, tt.wantMsg)
			}
		})
	}
}

func TestTruthy(t *testing.T) {
	var vars Vars
	vars.Add("name", "x")
	if err := vars.AddJSON("n", "2"); err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"name": "x", "n": json.Number("2"), "nested": map[string]any{"up": nil}}
	tests := []struct {
		expr string
		want bool
	}{
		{".name == $name", true},
		{".n == $n", true},
		{".n > 1", true},
		{".nested.up", false},  // null is false
		{"empty", false},       // no output is false
		{"false, true", false}, // the first output decides
		{"0", true},            // 0 is true in jq
		{".missing | not", true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := mustCompile(t, tt.expr, vars).Truthy(context.Background(), obj)
			if err != nil || got != tt.want {
				t.Errorf("Truthy = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	p := mustCompile(t, ".status, .tags[]", Vars{})
	a := map[string]any{"status": "up", "tags": []any{"a", json.Number("1")}, "hb": 1}
	tests := []struct {
		name string
		b    map[string]any
		want bool
	}{
		{"outside the projection", map[string]any{"status": "up", "tags": []any{"a", 1.0}, "hb": 2}, true},
		{"inside", map[string]any{"status": "down", "tags": []any{"a", 1}}, false},
		{"more outputs", map[string]any{"status": "up", "tags": []any{"a", 1, "b"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Equal(context.Background(), a, tt.b)
			if err != nil || got != tt.want {
				t.Errorf("Equal = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	if _, err := mustCompile(t, ".a.b", Vars{}).Truthy(context.Background(), "a string"); err == nil || !strings.HasPrefix(err.Error(), "--filter: expected an object") {
		t.Errorf("indexing a string: err = %v", err)
	}
	// A runaway expression is cut off by the time limit.
	p := mustCompile(t, "[repeat(1)] | length > 0", Vars{})
	p.timeout = 50 * time.Millisecond
	if _, err := p.Truthy(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "evaluation took longer than 50ms") {
		t.Errorf("runaway: err = %v", err)
	}
	// `repeat` alone is fine: only its first output is needed.
	if ok, err := mustCompile(t, "repeat(true)", Vars{}).Truthy(context.Background(), nil); !ok || err != nil {
		t.Errorf("repeat(true): %v, %v", ok, err)
	}
}
