package jq

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

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
