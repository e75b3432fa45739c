package render

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/jq"
)

// TestOutputs: what the gojq command prints with -r, written out by hand
// for the cases where the layout is the point.
func TestOutputs(t *testing.T) {
	for _, c := range []struct {
		name string
		outs []any
		want string
	}{
		{"none", nil, ""},
		{"strings are raw", []any{"a\tb", "", "ü \"q\" \\"}, "a\tb\n\nü \"q\" \\\n"},
		{"scalars", []any{nil, true, false, 0, -7, 1.5, json.Number("1.0")}, "null\ntrue\nfalse\n0\n-7\n1.5\n1.0\n"},
		{"empty containers", []any{[]any{}, map[string]any{}}, "[]\n{}\n"},
		{"nested", []any{map[string]any{"b": []any{1, map[string]any{}, []any{}}, "a": "x", "A": nil}},
			"{\n  \"A\": null,\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    {},\n    []\n  ]\n}\n"},
		{"strings inside are JSON", []any{[]any{"<&>\u2028", "\x7f\x01\b\f\n\r\t", "\xff"}},
			"[\n  \"<&>\u2028\",\n  \"\\u007f\\u0001\\b\\f\\n\\r\\t\",\n  \"\\ufffd\"\n]\n"},
		{"floats", []any{math.NaN(), math.Inf(1), math.Inf(-1), 1e-7, 1e21, 1e20, 123456789.125, 0.000001},
			"null\n1.7976931348623157e+308\n-1.7976931348623157e+308\n1e-7\n1e+21\n100000000000000000000\n123456789.125\n0.000001\n"},
		{"big", []any{new(big.Int).Lsh(big.NewInt(1), 100)}, "1267650600228229401496703205376\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := appendOutputs(nil, c.outs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, string(got)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	if _, err := appendOutputs(nil, []any{[]any{struct{}{}}}); err == nil {
		t.Error("a value of a type gojq does not output: no error")
	}
}

// TestOutputsModel holds the encoder to gojq's own (gojq.Marshal, the
// encoder of its library, which its command's shares but for the layout)
// laid out as jq does by default (json.Indent by two spaces), over random
// values, passed through a gojq program as the view's objects are.
func TestOutputsModel(t *testing.T) {
	p, err := jq.Compile("--render", ".[]", jq.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		in := make([]any, 1+rng.IntN(4))
		for j := range in {
			in[j] = randomValue(rng, 4)
		}
		outs, err := p.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		for _, v := range outs {
			if s, ok := v.(string); ok {
				want.WriteString(s)
			} else {
				compact, err := gojq.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Indent(&want, compact, "", "  "); err != nil {
					t.Fatalf("gojq.Marshal(%#v) = %q: %v", v, compact, err)
				}
			}
			want.WriteByte('\n')
		}
		got, err := appendOutputs(nil, outs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), got) {
			t.Fatalf("value %d, %#v:\n(-want +got)\n%s", i, in, cmp.Diff(want.String(), string(got)))
		}
	}
}

// randomValue returns a value of the kinds a decoded view holds and a
// program outputs, nested at most depth deep.
func randomValue(rng *rand.Rand, depth int) any {
	n := 9
	if depth == 0 {
		n = 7
	}
	switch rng.IntN(n) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return randomNumber(rng)
	case 3, 4:
		return randomString(rng)
	case 5:
		return json.Number([]string{"0", "-1", "1.50", "1e400", "12345678901234567890123"}[rng.IntN(5)])
	case 6:
		return rng.IntN(1<<20) - 1<<19
	case 7:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	default:
		m := make(map[string]any)
		for range rng.IntN(5) {
			m[randomString(rng)] = randomValue(rng, depth-1)
		}
		return m
	}
}

func randomNumber(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return float64(rng.IntN(1000) - 500)
	case 1:
		return math.Float64frombits(rng.Uint64()) // NaN and the infinities too
	case 2:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e21, 1e-6, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64}[rng.IntN(9)]
	default:
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(60)-30))
	}
}

// randomString returns a string of ASCII, control characters, DEL, HTML's
// specials, U+2028, letters beyond ASCII and emoji, and now and then a
// byte that is not UTF-8.
func randomString(rng *rand.Rand) string {
	const pieces = "ab Z0~\"\\/<>&\x7f\x00\x01\x08\x09\x0a\x0c\x0d\x1b\x1f"
	var b strings.Builder
	for range rng.IntN(12) {
		switch rng.IntN(10) {
		case 0:
			b.WriteString([]string{"é", "ü", "\u2028", "\u2029", "日本", "😀", "\ufeff", "\ufffd"}[rng.IntN(8)])
		case 1:
			b.WriteByte(byte(0x80 + rng.IntN(0x80))) // not UTF-8 on its own
		default:
			b.WriteByte(pieces[rng.IntN(len(pieces))])
		}
	}
	return b.String()
}
