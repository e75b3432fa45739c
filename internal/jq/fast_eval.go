package jq

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

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
