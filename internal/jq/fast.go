package jq

import (
	"bytes"

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
