package jq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// The fast path against gojq: random expressions of the subset over
// random JSON. Whatever the fast path decides must be gojq's answer (for
// --filter's first output, for every output, and for --equals); what it
// leaves undecided gojq answers. The inputs are built to reach every
// edge: escaped keys and strings that equal plain ones, numbers that are
// equal but spelled differently, null and scalars where paths expect
// objects, arrays where they expect objects and the reverse.

var (
	fastKeys    = []string{`"a"`, `"b"`, `"state"`, `"key"`, `"pairs"`, `"\u0061"`, `"é"`}
	fastStrings = []string{`"UP"`, `"DOWN"`, `"\u0055P"`, `"rack"`, `"é"`, `"\u00e9"`, `"a"`, `""`, `"Up\n"`}
	fastNumbers = []string{`0`, `1`, `-0`, `1.0`, `10`, `1e1`, `-3`, `123456789012345678901`}
)

// randomDoc returns random compact JSON, objects and arrays nested up to
// depth 3.
func randomDoc(rng *rand.Rand, depth int) string {
	k := rng.IntN(12)
	if depth == 0 && rng.IntN(4) > 0 {
		k = 0 // mostly objects, as the objects nodewatch filters are
	}
	switch {
	case depth < 3 && k < 4:
		var ms []string
		for range rng.IntN(4) {
			ms = append(ms, fastKeys[rng.IntN(len(fastKeys))]+":"+randomDoc(rng, depth+1))
		}
		return "{" + strings.Join(ms, ",") + "}"
	case depth < 3 && k < 6:
		var es []string
		for range rng.IntN(4) {
			es = append(es, randomDoc(rng, depth+1))
		}
		return "[" + strings.Join(es, ",") + "]"
	case k < 8:
		return fastStrings[rng.IntN(len(fastStrings))]
	case k < 10:
		return fastNumbers[rng.IntN(len(fastNumbers))]
	}
	return []string{"null", "true", "false"}[rng.IntN(3)]
}

// randomPath returns a path of the subset, with [] only if iter.
func randomPath(rng *rand.Rand, iter bool) string {
	p := "."
	for range rng.IntN(4) {
		var s string
		switch rng.IntN(6) {
		case 0, 1:
			s = []string{"a", "b", "state", "key", "pairs"}[rng.IntN(5)]
			if p != "." {
				s = "." + s
			}
		case 2:
			s = `["` + []string{"a", "é", "key"}[rng.IntN(3)] + `"]`
		case 3:
			s = fmt.Sprintf("[%d]", rng.IntN(3))
		default:
			if !iter {
				continue
			}
			s = "[]"
		}
		p += s
	}
	return p
}

// randomSingle returns an expression of the subset with one output.
func randomSingle(rng *rand.Rand, depth int) string {
	k := rng.IntN(12)
	if depth > 2 {
		k = rng.IntN(3)
	}
	switch k {
	case 0:
		return randomPath(rng, false)
	case 1:
		return []string{`"UP"`, `"é"`, `"a"`, "1", "0", "10", "null", "true", "false"}[rng.IntN(9)]
	case 2:
		return "(" + randomPath(rng, false) + " == " + []string{`"UP"`, `"DOWN"`, `"é"`, "1", "0", "null", "true"}[rng.IntN(7)] + ")"
	case 3, 4:
		op := []string{"==", "!=", "and", "or"}[rng.IntN(4)]
		return "(" + randomSingle(rng, depth+1) + " " + op + " " + randomSingle(rng, depth+1) + ")"
	case 5:
		return "(" + randomSingle(rng, depth+1) + " | not)"
	case 6:
		return `has("` + []string{"a", "state", "é", "zz"}[rng.IntN(4)] + `")`
	case 7:
		return "(" + randomPath(rng, false) + ` | has("key"))`
	case 8:
		return "(" + randomPath(rng, false) + ` | test("` + []string{"^U", "p$", "é", "[0-9]"}[rng.IntN(4)] + `"))`
	case 9:
		return "(" + randomPath(rng, false) + ` | test("up"; "` + []string{"i", "", "gm", "x"}[rng.IntN(4)] + `"))`
	case 10:
		return "(" + randomPath(rng, false) + " | " + randomSingle(rng, depth+1) + ")"
	}
	return "not"
}

// randomExpr returns an expression of the subset, with any number of
// outputs.
func randomExpr(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return randomPath(rng, true)
	case 1:
		return randomPath(rng, true) + " | select(" + randomSingle(rng, 1) + ")"
	case 2:
		return "select(" + randomSingle(rng, 1) + ")"
	case 3:
		return randomPath(rng, true) + " | " + randomSingle(rng, 1)
	}
	return randomSingle(rng, 0)
}

// checkFast compares the fast path with gojq for expr over doc (compact
// JSON) and, if other is not nil, for Equal of doc and other. It returns
// how many of the three questions the fast path decided. With knowing,
// the Docs know where the member that the expression's paths start at is
// (as an etcd key's object knows its value, and its Index), so that the
// rebased fast path answers.
func checkFast(t *testing.T, expr string, doc, other []byte, knowing bool) int {
	t.Helper()
	p, err := Compile("--filter", expr, Vars{})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if p.fast == nil {
		return 0
	}
	ctx := context.Background()
	tree, err := jsondoc.Decode(doc)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	docOf := func(b []byte) *jsondoc.Doc {
		if knowing && p.rebasedOn != "" {
			if v, ok := jsondoc.Field(b, p.rebasedOn); ok {
				start := cap(b) - cap(v)                          // v is b[start:...]
				_, x, err := jsondoc.AppendCompactIndexed(nil, v) // v is compact: the same offsets
				if err != nil && utf8.Valid(v) {
					t.Fatal(err)
				} // else no Index: one is made only of valid UTF-8
				return jsondoc.NewIndexed(b, p.rebasedOn, start, start+len(v), x)
			}
		}
		return jsondoc.New(b)
	}
	n, in, x := p.fastInput(docOf(doc))
	decided := 0
	if firstOut, ok := n.one(in, x); ok {
		decided++
		want, err := p.Truthy(ctx, tree)
		if err != nil {
			t.Fatalf("%s over %s: the fast path's first output is %s, gojq fails: %v", expr, doc, firstOut, err)
		}
		if got := firstOut != nil && truthy(firstOut); got != want {
			t.Fatalf("%s over %s: the fast path's first output is %s (truthy %v), gojq's truth is %v", expr, doc, firstOut, got, want)
		}
	}
	var outs [][]byte
	if n.run(in, x, func(o []byte) bool { outs = append(outs, o); return true }) {
		decided++
		want, err := p.Run(ctx, tree)
		if err != nil {
			t.Fatalf("%s over %s: the fast path gives %q, gojq fails: %v", expr, doc, outs, err)
		}
		if len(outs) != len(want) {
			t.Fatalf("%s over %s: the fast path gives %q, gojq %v", expr, doc, outs, want)
		}
		for i, o := range outs {
			v, err := jsondoc.Decode(o)
			if err != nil || gojq.Compare(v, want[i]) != 0 {
				t.Fatalf("%s over %s: the fast path's output %d is %s, gojq's %v", expr, doc, i, o, want[i])
			}
		}
	}
	if other != nil {
		if eq, ok := p.fastEqualDocs(docOf(doc), docOf(other)); ok {
			decided++
			otree, err := jsondoc.Decode(other)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.Equal(ctx, tree, otree)
			if err != nil {
				t.Fatalf("--equals %s of %s and %s: the fast path says %v, gojq fails: %v", expr, doc, other, eq, err)
			}
			if eq != want {
				t.Fatalf("--equals %s of %s and %s: the fast path says %v, gojq %v", expr, doc, other, eq, want)
			}
		}
	}
	return decided
}

func TestFastModel(t *testing.T) {
	if !fast.On(fast.JQ) {
		t.Skip("the jq fast path is off (NODEWATCH_FAST): there is nothing to hold to gojq")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const runs = 30000
	decided, inSubset, rebased := 0, 0, 0
	for range runs {
		expr := randomExpr(rng)
		doc, other := randomDoc(rng, 0), randomDoc(rng, 0)
		if rng.IntN(2) == 0 {
			other = doc // equal outputs must be found equal too
		}
		p, err := Compile("--filter", expr, Vars{})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if p.fast != nil {
			inSubset++
		}
		knowing := rng.IntN(2) == 0
		if knowing && p.rebased != nil {
			rebased++
		}
		decided += checkFast(t, expr, []byte(doc), []byte(other), knowing)
	}
	// The generator stays in the subset, and the fast path answers most
	// questions: the test compares answers, not fallbacks.
	t.Logf("%d of %d expressions in the subset; %d of %d questions decided by the fast path; %d runs over a rebased path", inSubset, runs, decided, 3*runs, rebased)
	if inSubset < runs*9/10 || decided < runs {
		t.Errorf("the fast path decided too little: %d of %d expressions in the subset, %d of %d questions", inSubset, runs, decided, 3*runs)
	}
}

// TestFastSubset: what the fast path takes, and what it leaves to gojq.
func TestFastSubset(t *testing.T) {
	for expr, in := range map[string]bool{
		`.value.state == "NODE_STATE_UP"`:          true,
		`.labels.pairs[] | select(.key == "rack")`: true,
		`has("x") and (.a | not)`:                  true,
		`.name | test("^web"; "i")`:                true,
		`.["a"].b[0] != null or .c`:                true,
		`.a?`:                                      false,
		`.a == $x`:                                 false,
		`.a | length`:                              false,
		`.a == 1.5`:                                false,
		`(.a[] == 1)`:                              false, // operands of == must have one output
		`select(.a[])`:                             false,
		`.[-1]`:                                    false,
		`test("(")`:                                false, // gojq reports the bad expression
		`.a | test("x"; "q")`:                      false,
		`def f: .a; f`:                             false,
		`"\(.a)" == "x"`:                           false,
		`.a as $x | $x`:                            false,
		`[.a] == [1]`:                              false,
		`{a: 1} == .b`:                             false,
		`.a + 1 == 2`:                              false,
		`.a[1:2]`:                                  false,
		`"".""`:                                    false,
		`(.a | has("b"))`:                          true,
		`select(.state == "UP") | .a`:              true,
		`.x[] | select(.key == "rack" and .value == "r1")`: true,
	} {
		var vars Vars
		vars.Add("x", 1.0)
		p, err := Compile("--filter", expr, vars)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := p.fast != nil; got != in {
			t.Errorf("%s: in the fast path's subset: %v, want %v", expr, got, in)
		}
	}
}

func FuzzFast(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		f.Add(randomExpr(rng), randomDoc(rng, 0), randomDoc(rng, 0))
	}
	f.Fuzz(func(t *testing.T, expr, doc, other string) {
		p, err := Compile("--filter", expr, Vars{})
		if err != nil || p.fast == nil {
			return
		}
		a, err := jsondoc.AppendCompact(nil, []byte(doc))
		if err != nil {
			return
		}
		b, err := jsondoc.AppendCompact(nil, []byte(other))
		if err != nil {
			return
		}
		checkFast(t, expr, a, b, len(doc)%2 == 0)
	})
}

// TestFastRebased: expressions whose paths all start at one member run
// over that member alone when the Doc knows where it is; those that read
// their input itself (not, select, has, test, `.`) must not, and both
// give gojq's answers over members that are null, false, objects and
// arrays.
func TestFastRebased(t *testing.T) {
	for expr, rebased := range map[string]bool{
		`.a.b == 1`:                       true,
		`.a == null`:                      true,
		`.a.b == 1 and .a.c != "x"`:       true,
		`.a.b[] | select(.k == "r")`:      true,
		`.a | not`:                        true,
		`.a == null and not`:              false,
		`.a == false or (. | has("a"))`:   false,
		`select(.a == null)`:              false,
		`.a.b == 1 and .c == 1`:           false,
		`. == null`:                       false,
		`.a == null and (.a | test("x"))`: true,
		`.a | has("b")`:                   true,
		`.a | has("c") | not`:             true,
		`(.a | has("b")) and .a.c == "x"`: true,
		`.a | .b`:                         true,
	} {
		p, err := Compile("--filter", expr, Vars{})
		if err != nil || p.fast == nil {
			t.Fatalf("%s: not in the fast path (%v)", expr, err)
		}
		if got := p.rebased != nil; got != rebased {
			t.Errorf("%s: rebased %v, want %v", expr, got, rebased)
		}
		docs := []string{`{"a":null}`, `{"a":false}`, `{"a":{"b":1,"c":"x"}}`, `{"x":1,"a":[1]}`,
			`{"a":{"b":[{"k":"r"},{"k":"s"}]}}`, `{"a":"x","c":1}`, `{"a":true}`}
		for _, d := range docs {
			for _, o := range docs {
				checkFast(t, expr, []byte(d), []byte(o), true)
			}
		}
	}
}
