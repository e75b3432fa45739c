package jq

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// The fast path: the expressions users write most (`.value.state ==
// "UP"`, `.labels.pairs[] | select(.key == "rack")`, `has("x") and (.a
// | not)`) evaluated over an object's JSON bytes, without decoding it
// into a tree for gojq. It decides only what it can decide exactly as
// gojq would; anything else (an error, a number that is not a plain
// integer, two objects with different bytes, a string it would have to
// unescape to match with a regular expression) it leaves undecided, and
// the Program asks gojq. TestFastModel and FuzzFast hold it to gojq's
// answers.
//
// The subset: `.`, paths of names, constant strings and non-negative
// integer indexes, `[]` over arrays, `|`, `==`, `!=`, `and`, `or`, `not`,
// `select(c)`, `has("name")`, `test("re")`, `test("re"; "flags")`,
// parentheses, and the constants null, true, false, strings and
// non-negative integers. Operands of `==`, `!=`, `and`, `or` and the
// argument of select must give exactly one output (paths, constants, and
// the operators and functions over them).

// fastNode is a compiled expression of the subset. run calls k with each
// output, in gojq's order, until k returns false (stop); it returns false
// when the answer is not decided here (gojq must be asked), in which case
// the outputs given to k so far mean nothing. one returns the first
// output (nil for none) without a callback, which would escape to the
// heap for every evaluation.
//
// x is the Index of v when v is an indexed object (a Doc's known member,
// see jsondoc.Index), else nil: a node passes it on with v, and a path
// finds its first member through it.
type fastNode interface {
	run(v []byte, x jsondoc.Index, k func(out []byte) bool) (decided bool)
	one(v []byte, x jsondoc.Index) (out []byte, decided bool)
}

// runOne is run for nodes with at most one output.
func runOne(n fastNode, v []byte, x jsondoc.Index, k func([]byte) bool) bool {
	out, decided := n.one(v, x)
	if decided && out != nil {
		k(out)
	}
	return decided
}

// firstOf is one for nodes with any number of outputs.
func firstOf(n fastNode, v []byte, x jsondoc.Index) (out []byte, decided bool) {
	decided = n.run(v, x, func(o []byte) bool { out = o; return false })
	return out, decided
}

// JSON encodings of the booleans and null the subset makes.
var (
	jsonTrue  = []byte("true")
	jsonFalse = []byte("false")
	jsonNull  = []byte("null")
)

func jsonBool(b bool) []byte {
	if b {
		return jsonTrue
	}
	return jsonFalse
}

// truthy reports jq's truth of an encoded value: neither false nor null.
func truthy(v []byte) bool { return !bytes.Equal(v, jsonFalse) && !bytes.Equal(v, jsonNull) }

// compileFast compiles q into the subset; nil when q is outside it.
func compileFast(q *gojq.Query) fastNode {
	n, _ := fastQuery(q)
	return n
}

// fastQuery compiles q; single reports that it gives exactly one output
// whenever it is decided.
func fastQuery(q *gojq.Query) (n fastNode, single bool) {
	if q == nil || q.Meta != nil || len(q.Imports) > 0 || len(q.FuncDefs) > 0 || len(q.Patterns) > 0 {
		return nil, false
	}
	if q.Term != nil {
		return fastTerm(q.Term)
	}
	l, lsingle := fastQuery(q.Left)
	r, rsingle := fastQuery(q.Right)
	if l == nil || r == nil {
		return nil, false
	}
	switch q.Op {
	case gojq.OpPipe:
		return pipe{l, r, lsingle}, lsingle && rsingle
	case gojq.OpEq, gojq.OpNe, gojq.OpAnd, gojq.OpOr:
		if !lsingle || !rsingle {
			return nil, false
		}
		return binary{q.Op, l, r}, true
	}
	return nil, false
}

func fastTerm(t *gojq.Term) (fastNode, bool) {
	var base fastNode
	switch t.Type {
	case gojq.TermTypeIdentity:
		base = path{}
	case gojq.TermTypeIndex:
		step, ok := fastIndex(t.Index)
		if !ok {
			return nil, false
		}
		base = path{step}
	case gojq.TermTypeNull:
		base = constant{jsonNull}
	case gojq.TermTypeTrue:
		base = constant{jsonTrue}
	case gojq.TermTypeFalse:
		base = constant{jsonFalse}
	case gojq.TermTypeNumber:
		if !plainInt(t.Number) {
			return nil, false
		}
		base = constant{[]byte(t.Number)}
	case gojq.TermTypeString:
		s, ok := constString(t.Str)
		if !ok {
			return nil, false
		}
		b, err := gojq.Marshal(s)
		if err != nil {
			return nil, false
		}
		base = constant{b}
	case gojq.TermTypeQuery:
		if len(t.SuffixList) > 0 {
			return nil, false
		}
		return fastQuery(t.Query)
	case gojq.TermTypeFunc:
		return fastFunc(t)
	default:
		return nil, false
	}
	p, isPath := base.(path)
	if !isPath {
		if len(t.SuffixList) > 0 {
			return nil, false // a constant's suffixes: gojq's to evaluate
		}
		return base, true
	}
	// A path with its suffixes: names and indexes, and [] over arrays.
	single := true
	for _, s := range t.SuffixList {
		switch {
		case s.Optional:
			return nil, false
		case s.Iter:
			p = append(p, step{iter: true})
			single = false
		case s.Index != nil:
			st, ok := fastIndex(s.Index)
			if !ok {
				return nil, false
			}
			p = append(p, st)
		default:
			return nil, false
		}
	}
	return p, single
}

// constString returns the value of a string literal without
// interpolation.
func constString(s *gojq.String) (string, bool) {
	if s == nil || len(s.Queries) > 0 {
		return "", false
	}
	return s.Str, true
}

// plainInt reports whether s is a non-negative integer as JSON writes it,
// small enough to compare exactly as an int64.
func plainInt(s string) bool {
	if s == "" || len(s) > 15 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func fastIndex(ix *gojq.Index) (step, bool) {
	switch {
	case ix == nil || ix.IsSlice || ix.End != nil:
		return step{}, false
	case ix.Name != "":
		return step{name: ix.Name, isName: true}, true
	case ix.Str != nil:
		s, ok := constString(ix.Str)
		return step{name: s, isName: true}, ok
	case ix.Start != nil && ix.Start.Term != nil && ix.Start.Right == nil && len(ix.Start.Term.SuffixList) == 0:
		switch t := ix.Start.Term; t.Type {
		case gojq.TermTypeString:
			s, ok := constString(t.Str)
			return step{name: s, isName: true}, ok
		case gojq.TermTypeNumber:
			if !plainInt(t.Number) {
				return step{}, false
			}
			i, err := strconv.Atoi(t.Number)
			return step{index: i}, err == nil
		}
	}
	return step{}, false
}

func fastFunc(t *gojq.Term) (fastNode, bool) {
	f := t.Func
	if len(t.SuffixList) > 0 {
		return nil, false
	}
	switch {
	case f.Name == "not" && len(f.Args) == 0:
		return not{}, true
	case f.Name == "select" && len(f.Args) == 1:
		c, single := fastQuery(f.Args[0])
		if c == nil || !single {
			return nil, false
		}
		return sel{c}, false
	case f.Name == "has" && len(f.Args) == 1:
		s, ok := constArg(f.Args[0])
		if !ok {
			return nil, false
		}
		return has{s}, true
	case f.Name == "test" && (len(f.Args) == 1 || len(f.Args) == 2):
		re, ok := constArg(f.Args[0])
		flags := ""
		if len(f.Args) == 2 {
			var fok bool
			flags, fok = constArg(f.Args[1])
			ok = ok && fok
		}
		// gojq's flags for test: g (no effect), i, m (dot matches
		// newline, Go's s); others are its error to report.
		if !ok || strings.Trim(flags, "gim") != "" {
			return nil, false
		}
		if strings.Contains(flags, "i") {
			re = "(?i)" + re
		}
		if strings.Contains(flags, "m") {
			re = "(?s)" + re
		}
		r, err := regexp.Compile(re)
		if err != nil {
			return nil, false
		}
		return test{r}, true
	}
	return nil, false
}

// constArg returns the value of an argument that is a string literal.
func constArg(q *gojq.Query) (string, bool) {
	if q == nil || q.Term == nil || q.Term.Type != gojq.TermTypeString || len(q.Term.SuffixList) > 0 || len(q.FuncDefs) > 0 {
		return "", false
	}
	return constString(q.Term.Str)
}

// constant is a literal: its encoding.
type constant struct{ json []byte }

func (c constant) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool {
	return runOne(c, v, x, k)
}
func (c constant) one([]byte, jsondoc.Index) ([]byte, bool) { return c.json, true }

// step is one step of a path: a name, an index, or [] (iter).
type step struct {
	name   string
	isName bool
	index  int
	iter   bool
}

// path is `.` followed by steps.
type path []step

func (p path) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool {
	_, decided := p.walk(v, x, k)
	return decided
}

func (p path) one(v []byte, x jsondoc.Index) ([]byte, bool) {
	for _, s := range p {
		if s.iter {
			return firstOf(p, v, x)
		}
	}
	return p.at(v, x)
}

// walk gives k the outputs of p over v; more is false once k stopped.
func (p path) walk(v []byte, x jsondoc.Index, k func([]byte) bool) (more, decided bool) {
	for i, s := range p {
		if !s.iter {
			continue
		}
		if v, decided = p[:i].at(v, x); !decided {
			return false, false
		}
		if len(v) == 0 || v[0] != '[' {
			return false, false // objects iterate in gojq's key order; others fail
		}
		more, decided = true, true
		jsondoc.Each(v, func(e []byte) bool {
			more, decided = p[i+1:].walk(e, nil, k)
			return more && decided
		})
		return more, decided
	}
	if v, decided = p.at(v, x); !decided {
		return false, false
	}
	return k(v), true
}

// at follows a path without [] to its one output.
func (p path) at(v []byte, x jsondoc.Index) ([]byte, bool) {
	for i, s := range p {
		switch {
		case len(v) == 0:
			return nil, false
		case bytes.Equal(v, jsonNull):
			continue // null: any name or index gives null
		case s.isName:
			if v[0] != '{' {
				return nil, false
			}
			var ok bool
			if i == 0 && x != nil {
				v, ok = x.Field(v, s.name)
			} else {
				v, ok = jsondoc.Field(v, s.name)
			}
			if !ok {
				v = jsonNull
			}
		default:
			if v[0] != '[' {
				return nil, false
			}
			var ok bool
			if v, ok = jsondoc.Element(v, s.index); !ok {
				v = jsonNull
			}
		}
	}
	return v, len(v) > 0
}

// pipe is `l | r`; lsingle: l has one output.
type pipe struct {
	l, r    fastNode
	lsingle bool
}

func (p pipe) one(v []byte, x jsondoc.Index) ([]byte, bool) {
	if !p.lsingle {
		return firstOf(p, v, x)
	}
	o, decided := p.l.one(v, x)
	if !decided || o == nil {
		return nil, decided
	}
	return p.r.one(o, nil)
}

func (p pipe) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool {
	decided := true
	ldecided := p.l.run(v, x, func(out []byte) bool {
		more := true
		if !p.r.run(out, nil, func(o []byte) bool { more = k(o); return more }) {
			decided = false
			return false
		}
		return more
	})
	return ldecided && decided
}

// binary is `l OP r` for ==, !=, and, or, both sides single.
type binary struct {
	op   gojq.Operator
	l, r fastNode
}

func (b binary) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool {
	return runOne(b, v, x, k)
}

func (b binary) one(v []byte, x jsondoc.Index) ([]byte, bool) {
	l, ok := b.l.one(v, x)
	if !ok || l == nil {
		return nil, false
	}
	switch b.op {
	case gojq.OpAnd, gojq.OpOr:
		if truthy(l) == (b.op == gojq.OpOr) {
			return jsonBool(b.op == gojq.OpOr), true // the right side is not evaluated
		}
		r, ok := b.r.one(v, x)
		if !ok || r == nil {
			return nil, false
		}
		return jsonBool(truthy(r)), true
	}
	r, ok := b.r.one(v, x)
	if !ok || r == nil {
		return nil, false
	}
	eq, ok := equalJSON(l, r)
	if !ok {
		return nil, false
	}
	return jsonBool(eq == (b.op == gojq.OpEq)), true
}

// equalJSON reports whether gojq finds the values encoded in a and b
// equal, when that is decided by their encodings.
func equalJSON(a, b []byte) (eq, decided bool) {
	if bytes.Equal(a, b) {
		return true, true // one encoding decodes to one value
	}
	ka, kb := kind(a[0]), kind(b[0])
	switch {
	case ka != kb:
		return false, true
	case ka == 'n' || ka == 't' || ka == 'f':
		return false, true // different bytes of one kind of literal cannot be
	case ka == '"':
		// Two strings that are their own values, with different bytes,
		// differ; escapes would have to be undone first.
		_, oka := plainString(a)
		_, okb := plainString(b)
		return false, oka && okb
	case ka == '0':
		if ia, err := strconv.ParseInt(string(a), 10, 64); err == nil && plainIntBytes(a) {
			if ib, err := strconv.ParseInt(string(b), 10, 64); err == nil && plainIntBytes(b) {
				return ia == ib, true
			}
		}
	}
	return false, false
}

// kind is the kind of value an encoding starting with c is: '{', '[',
// '"', 'n', 't', 'f', or '0' for a number.
func kind(c byte) byte {
	switch c {
	case '{', '[', '"', 'n', 't', 'f':
		return c
	}
	return '0'
}

// plainIntBytes reports whether a number's encoding is an integer in
// jq's exact range that gojq reads as an int.
func plainIntBytes(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	return plainInt(string(b))
}

// plainString returns the value of an encoded string that has no escapes
// and nothing beyond ASCII, which is its own value.
func plainString(q []byte) (string, bool) {
	raw := q[1 : len(q)-1]
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			return "", false
		}
	}
	return string(raw), true
}

// not is `not`.
type not struct{}

func (n not) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool { return runOne(n, v, x, k) }
func (not) one(v []byte, _ jsondoc.Index) ([]byte, bool)              { return jsonBool(!truthy(v)), true }

// sel is `select(c)`.
type sel struct{ c fastNode }

func (s sel) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool { return runOne(s, v, x, k) }

func (s sel) one(v []byte, x jsondoc.Index) ([]byte, bool) {
	c, ok := s.c.one(v, x)
	if !ok || c == nil {
		return nil, false
	}
	if truthy(c) {
		return v, true
	}
	return nil, true
}

// has is `has("name")` over objects (anything else is gojq's to answer).
type has struct{ name string }

func (h has) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool { return runOne(h, v, x, k) }

func (h has) one(v []byte, x jsondoc.Index) ([]byte, bool) {
	if v[0] != '{' {
		return nil, false
	}
	var ok bool
	if x != nil {
		_, ok = x.Field(v, h.name)
	} else {
		_, ok = jsondoc.Field(v, h.name)
	}
	return jsonBool(ok), true
}

// test is `test(re)` over strings without escapes.
type test struct{ re *regexp.Regexp }

func (t test) run(v []byte, x jsondoc.Index, k func([]byte) bool) bool { return runOne(t, v, x, k) }

func (t test) one(v []byte, _ jsondoc.Index) ([]byte, bool) {
	if v[0] != '"' {
		return nil, false
	}
	s, ok := plainString(v)
	if !ok {
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, false
		}
	}
	return jsonBool(t.re.MatchString(s)), true
}

// firstName returns the name that the first path n reads from its input
// starts with, if it starts with a name.
func firstName(n fastNode) (string, bool) {
	switch n := n.(type) {
	case path:
		if len(n) > 0 && n[0].isName {
			return n[0].name, true
		}
	case binary:
		if name, ok := firstName(n.l); ok {
			return name, true
		}
		return firstName(n.r)
	case pipe:
		return firstName(n.l)
	}
	return "", false
}

// rebase returns n for an input that is the member name of n's input:
// every path n reads from its input must start with .name, and is
// shortened by it; constants stay; == != and or rebase both sides, a pipe
// its left. Anything else that reads the input itself (not, select, has,
// test) cannot be rebased. Over an object with a member name, n over the
// object and the rebased n over the member give the same outputs: a
// path's first step picks the member, as Field does.
func rebase(n fastNode, name string) (fastNode, bool) {
	switch n := n.(type) {
	case constant:
		return n, true
	case path:
		if len(n) == 0 || !n[0].isName || n[0].name != name {
			return nil, false
		}
		return n[1:], true
	case binary:
		l, lok := rebase(n.l, name)
		r, rok := rebase(n.r, name)
		if !lok || !rok {
			return nil, false
		}
		return binary{n.op, l, r}, true
	case pipe:
		l, ok := rebase(n.l, name)
		if !ok {
			return nil, false
		}
		if lp, isPath := l.(path); isPath && len(lp) == 0 {
			// .name | r: r over the member itself, which then reads it
			// with its Index (a pipe gives its right side none).
			return n.r, true
		}
		return pipe{l, n.r, n.lsingle}, true
	}
	return nil, false
}
