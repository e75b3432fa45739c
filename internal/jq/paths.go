package jq

import "github.com/itchyny/gojq"

// Paths returns the paths of the object members that the expression
// reads from its input itself, in the order they appear, each once:
// ["state"] and ["status" "external_address"] for
// `.state == "NODE_STATE_UP" and .status.external_address != null`. A
// path ends where the expression stops naming members (.a[0].b is
// ["a"]); what reads the output of something else (the right of a |,
// the function of map or any, a variable) is left out. So every path it
// returns is read from the input, but not every path read is returned:
// it serves hints ("no object has .stat"), which must not be wrong.
func (p *Program) Paths() [][]string { return p.paths }

// Expr returns the expression as it was given to Compile.
func (p *Program) Expr() string { return p.expr }

// inputPaths appends to out the paths that q reads from its input (see
// Paths).
func inputPaths(q *gojq.Query, out [][]string) [][]string {
	if q == nil || len(q.FuncDefs) > 0 {
		return out // a definition may rename what the expression calls
	}
	if q.Term != nil {
		return termPaths(q.Term, out)
	}
	switch q.Op {
	case gojq.OpPipe:
		// The right reads the left's output, unless the left binds
		// variables (`.a as $x | …`): then it reads the input too, but
		// it is left out, as the patterns may shadow what it names.
		return inputPaths(q.Left, out)
	case gojq.OpComma, gojq.OpAdd, gojq.OpSub, gojq.OpMul, gojq.OpDiv, gojq.OpMod,
		gojq.OpEq, gojq.OpNe, gojq.OpGt, gojq.OpLt, gojq.OpGe, gojq.OpLe,
		gojq.OpAnd, gojq.OpOr, gojq.OpAlt:
		return inputPaths(q.Right, inputPaths(q.Left, out))
	}
	return out // assignments and updates
}

// termPaths appends the paths that t reads from its input.
func termPaths(t *gojq.Term, out [][]string) [][]string {
	switch t.Type {
	case gojq.TermTypeIndex, gojq.TermTypeIdentity: // .a.b, .["a"].b
		var path []string
		if t.Type == gojq.TermTypeIndex {
			var ok bool
			if path, ok = member(t.Index, nil); !ok {
				return out
			}
		}
		for _, s := range t.SuffixList {
			var ok bool
			if s.Index == nil {
				break
			}
			if path, ok = member(s.Index, path); !ok {
				break
			}
		}
		return addPath(out, path)
	case gojq.TermTypeQuery:
		return inputPaths(t.Query, out) // (…) reads the input; its suffixes read its output
	case gojq.TermTypeUnary:
		return termPaths(t.Unary.Term, out)
	case gojq.TermTypeIf:
		out = inputPaths(t.If.Then, inputPaths(t.If.Cond, out))
		for _, e := range t.If.Elif {
			out = inputPaths(e.Then, inputPaths(e.Cond, out))
		}
		return inputPaths(t.If.Else, out)
	case gojq.TermTypeTry:
		return inputPaths(t.Try.Body, out)
	case gojq.TermTypeFunc:
		// select(f) runs f on its input; most functions with arguments
		// (map, any, sort_by, …) run them on something else.
		if t.Func.Name == "select" && len(t.Func.Args) == 1 {
			return inputPaths(t.Func.Args[0], out)
		}
	}
	return out
}

// member appends to path the member that ix names (.name, ."name" or
// .["name"]),
// and reports whether it names one.
func member(ix *gojq.Index, path []string) ([]string, bool) {
	switch {
	case ix.IsSlice || ix.End != nil:
		return path, false
	case ix.Start != nil: // .["a"]
		if q := ix.Start; q.Term != nil && q.Term.Type == gojq.TermTypeString && len(q.Term.SuffixList) == 0 {
			if s, ok := constString(q.Term.Str); ok {
				return append(path, s), true
			}
		}
		return path, false
	case ix.Name != "":
		return append(path, ix.Name), true
	case ix.Str != nil:
		s, ok := constString(ix.Str)
		if !ok {
			return path, false
		}
		return append(path, s), true
	}
	return path, false
}

// addPath appends path to out unless it is empty or already there.
func addPath(out [][]string, path []string) [][]string {
	if len(path) == 0 {
		return out
	}
outer:
	for _, p := range out {
		if len(p) != len(path) {
			continue
		}
		for i := range p {
			if p[i] != path[i] {
				continue outer
			}
		}
		return out
	}
	return append(out, path)
}
