// Package jq compiles and runs the jq expressions that decide what a watch
// prints (--filter), which changes count (--equals) and when it ends
// (--until), with gojq: bounded in time, with jq's --arg/--argjson
// variables, and with errors that say where an expression went wrong.
package jq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// DefaultEvalTimeout bounds one evaluation of a jq expression, so that
// `repeat` or `range(1e18)` cannot hang the watch.
const DefaultEvalTimeout = 2 * time.Second

// Vars are the variables bound with --arg and --argjson, as jq binds them.
type Vars struct {
	names  []string
	values []any
}

// Add binds $name to value; a later binding of the same name wins.
func (v *Vars) Add(name string, value any) {
	name = "$" + strings.TrimPrefix(name, "$")
	for i, n := range v.names {
		if n == name {
			v.values[i] = value
			return
		}
	}
	v.names = append(v.names, name)
	v.values = append(v.values, value)
}

// AddJSON binds $name to the value of the JSON text value (jq's
// --argjson).
func (v *Vars) AddJSON(name, value string) error {
	d := json.NewDecoder(strings.NewReader(value))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return fmt.Errorf("invalid JSON text: %v", err)
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	v.Add(name, x)
	return nil
}

// CompileError is a jq expression that does not compile. Its message names
// the expression and the position, e.g.
// `--filter: unexpected token ")" at position 7: .a | )`.
type CompileError struct {
	Name   string // what the expression is called in messages: "--filter"
	Expr   string
	Offset int // byte offset of the error, -1 when unknown
	Err    error
}

func (e *CompileError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: %v at position %d: %s", e.Name, e.Err, e.Offset, e.Expr)
	}
	return fmt.Sprintf("%s: %v: %s", e.Name, e.Err, e.Expr)
}

func (e *CompileError) Unwrap() error { return e.Err }

// Program is a compiled jq expression. It is safe for concurrent use.
type Program struct {
	name string
	code *gojq.Code
	fast fastNode // nil: outside the fast path's subset (fast.go)
	// rebased is fast for the member named rebasedOn of the input, when
	// every path that fast reads from its input starts there (see
	// rebase): `.value.state == "UP"` over an etcd key's object is
	// `.state == "UP"` over its value, which a Doc that knows where its
	// value is hands over without reading the rest.
	rebased   fastNode
	rebasedOn string
	values    []any
	timeout   time.Duration
	expr      string
	paths     [][]string // Paths
}

// Compile parses and compiles expr with vars bound. name is what messages
// call the expression: the caller's name for it, such as the flag that gave
// it ("--filter").
func Compile(name, expr string, vars Vars) (*Program, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		ce := &CompileError{Name: name, Expr: expr, Offset: -1, Err: err}
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			ce.Offset = pe.Offset
		}
		return nil, ce
	}
	code, err := gojq.Compile(q, gojq.WithVariables(vars.names))
	if err != nil {
		return nil, &CompileError{Name: name, Expr: expr, Offset: -1, Err: err}
	}
	p := &Program{name: name, code: code, values: vars.values, timeout: DefaultEvalTimeout, expr: expr, paths: inputPaths(q, nil)}
	if fast.On(fast.JQ) {
		p.fast = compileFast(q)
	}
	if name, ok := firstName(p.fast); ok {
		if r, ok := rebase(p.fast, name); ok {
			p.rebased, p.rebasedOn = r, name
		}
	}
	return p, nil
}

// fastInput returns the fast path to run over d, and its input: the
// rebased one over d's known member (and its Index) when it is the one
// the paths start at, else fast over d's JSON.
func (p *Program) fastInput(d *jsondoc.Doc) (fastNode, []byte, jsondoc.Index) {
	if v, x, ok := p.rebasedInput(d); ok {
		return p.rebased, v, x
	}
	return p.fast, d.JSON(), nil
}

// rebasedInput returns the input of rebased for d (d's known member, and
// its Index), if d knows the member that rebased reads.
func (p *Program) rebasedInput(d *jsondoc.Doc) ([]byte, jsondoc.Index, bool) {
	if p.rebased == nil {
		return nil, nil, false
	}
	name, v, x := d.Known()
	return v, x, name == p.rebasedOn
}

// Name returns what messages call the program (Compile's name).
func (p *Program) Name() string { return p.name }

// Run returns every output of the program for input v. It fails when the
// program raises an error, runs longer than its time limit, or ctx ends
// (with ctx's error).
func (p *Program) Run(ctx context.Context, v any) ([]any, error) {
	return p.run(ctx, v, -1)
}

// Truthy reports whether the first output for v is neither false nor null
// (jq's notion of truth); no output at all is false.
func (p *Program) Truthy(ctx context.Context, v any) (bool, error) {
	out, err := p.run(ctx, v, 1)
	if err != nil || len(out) == 0 {
		return false, err
	}
	return out[0] != nil && out[0] != false, nil
}

// TruthyDoc is Truthy for an object as the follower keeps it: a
// *jsondoc.Doc is answered from its JSON when the fast path can (see
// fast.go), and decoded for gojq only when it cannot; any other value
// goes to gojq as it is.
func (p *Program) TruthyDoc(ctx context.Context, v any) (bool, error) {
	if ok, decided := p.TruthyFast(v); decided {
		return ok, nil
	}
	return p.Truthy(ctx, jsondoc.TreeOf(v))
}

// TruthyFast is TruthyDoc when the fast path answers it (decided): for a
// *jsondoc.Doc, an expression of the fast path's subset, and no error. It
// never runs gojq, and is safe to call from several goroutines at once.
func (p *Program) TruthyFast(v any) (ok, decided bool) {
	d, isDoc := v.(*jsondoc.Doc)
	if !isDoc || p.fast == nil {
		return false, false
	}
	n, in, x := p.fastInput(d)
	out, decided := n.one(in, x)
	return decided && out != nil && truthy(out), decided
}

// EqualDoc is Equal for objects as the follower keeps them, answered
// from two *jsondoc.Docs' JSON when the fast path can.
func (p *Program) EqualDoc(ctx context.Context, a, b any) (bool, error) {
	da, aok := a.(*jsondoc.Doc)
	db, bok := b.(*jsondoc.Doc)
	if aok && bok && p.fast != nil {
		if eq, decided := p.fastEqualDocs(da, db); decided {
			return eq, nil
		}
	}
	return p.Equal(ctx, jsondoc.TreeOf(a), jsondoc.TreeOf(b))
}

// fastEqualDocs is EqualDoc's fast path: rebased over both known members
// when it can, else over both Docs' JSON.
func (p *Program) fastEqualDocs(da, db *jsondoc.Doc) (eq, decided bool) {
	if va, xa, ok := p.rebasedInput(da); ok {
		if vb, xb, ok := p.rebasedInput(db); ok {
			return fastEqual(p.rebased, va, vb, xa, xb)
		}
	}
	return fastEqual(p.fast, da.JSON(), db.JSON(), nil, nil)
}

// fastEqual compares the outputs of n for a and b, as Equal does.
func fastEqual(n fastNode, a, b []byte, xa, xb jsondoc.Index) (eq, decided bool) {
	var oa, ob [][]byte
	if !n.run(a, xa, func(o []byte) bool { oa = append(oa, o); return true }) ||
		!n.run(b, xb, func(o []byte) bool { ob = append(ob, o); return true }) {
		return false, false
	}
	if len(oa) != len(ob) {
		return false, true
	}
	for i := range oa {
		eq, decided := equalJSON(oa[i], ob[i])
		if !decided || !eq {
			return eq, decided
		}
	}
	return true, true
}

// Equal reports whether the program gives the same outputs for a and b
// (--equals as a projection).
func (p *Program) Equal(ctx context.Context, a, b any) (bool, error) {
	pa, err := p.Run(ctx, a)
	if err != nil {
		return false, err
	}
	pb, err := p.Run(ctx, b)
	if err != nil {
		return false, err
	}
	if len(pa) != len(pb) {
		return false, nil
	}
	for i := range pa {
		if gojq.Compare(pa[i], pb[i]) != 0 {
			return false, nil
		}
	}
	return true, nil
}

// run collects at most limit outputs (all if limit < 0).
func (p *Program) run(parent context.Context, v any, limit int) ([]any, error) {
	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	iter := p.code.RunWithContext(ctx, v, p.values...)
	var out []any
	for limit < 0 || len(out) < limit {
		x, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := x.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // `halt` or `empty`-like end: not an error
			}
			if parent.Err() != nil {
				return nil, parent.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%s: evaluation took longer than %v", p.name, p.timeout)
			}
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out = append(out, x)
	}
	return out, nil
}
