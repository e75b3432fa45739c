package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// compactCorpus holds JSON and near-JSON texts on the edges of the
// grammar; FuzzAppendCompact starts from them.
var compactCorpus = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5e`, `1e+5`, `1E-05`, `-12.5e3`, `.5`, `+1`,
	`"`, `""`, `"a"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/\b\f\n\r\t\"\\"`, "\"\x01\"", "\"\xff\xfe\"", `"\ud800"`,
	`true`, `tru`, `false`, `null`, `nul`, `nulls`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `{}`, `{ }`,
	`{"a":1}`, ` { "a" : [ 1 , 2 , { "b" : null } ] , "c" : "d e" } `, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
	"\t\n\r [\n1\n]\n", `[1]x`, `[1] [2]`, `{"a":"}"}`, `{"a":"\\"}`, `[[[[[]]]]]`, `[[[[[]]]]`, `{"a":{"b":{}}}`,
}

func checkCompact(t *testing.T, src []byte) {
	t.Helper()
	var want bytes.Buffer
	want.WriteString("prefix")
	werr := json.Compact(&want, src)
	got, gerr := AppendCompact([]byte("prefix"), src)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("AppendCompact(%q): error %v, json.Compact's %v", src, gerr, werr)
	}
	if werr != nil {
		want.Reset()
		want.WriteString("prefix")
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("AppendCompact(%q) = %q, json.Compact makes %q", src, got, want.Bytes())
	}
	// AppendCompactIndexed makes the same bytes, and an Index that finds
	// what scanning finds.
	// It fails, too, for a string that is not valid UTF-8 (and only
	// a string can hold a byte beyond ASCII).
	igot, x, ierr := AppendCompactIndexed([]byte("prefix"), src)
	if gerr == nil && !utf8.Valid(src) {
		if ierr == nil || string(igot) != "prefix" {
			t.Fatalf("AppendCompactIndexed(%q) = %q, %v; want an error for what is not UTF-8", src, igot, ierr)
		}
		return
	}
	if !bytes.Equal(igot, got) || (ierr == nil) != (gerr == nil) {
		t.Fatalf("AppendCompactIndexed(%q) = %q, %v; AppendCompact makes %q, %v", src, igot, ierr, got, gerr)
	}
	obj := got[len("prefix"):]
	if gerr != nil || len(obj) == 0 || obj[0] != '{' {
		if x != nil {
			t.Fatalf("AppendCompactIndexed(%q): an Index of what is no object: %v", src, x)
		}
		return
	}
	if x == nil && len(obj) > 2 {
		t.Fatalf("AppendCompactIndexed(%q): no Index", src)
	}
	checkIndex(t, obj, x)
}

// checkIndex: the members that x gives are those a scan of obj finds,
// and x.Field finds what Field finds, for each key and for one absent.
func checkIndex(t *testing.T, obj []byte, x Index) {
	t.Helper()
	scan, indexed := newWalker(obj, nil), newWalker(obj, x)
	keys := []string{"absent"}
	for {
		sok, iok := scan.next(), indexed.next()
		qs, vs, qi, vi := scan.key, scan.val, indexed.key, indexed.val
		if sok != iok || !bytes.Equal(qs, qi) || !bytes.Equal(vs, vi) {
			t.Fatalf("%s, Index %v: scanning finds %s:%s (%v), the Index %s:%s (%v)", obj, x, qs, vs, sok, qi, vi, iok)
		}
		if !sok {
			break
		}
		k := string(decodeKey(qs))
		// The key, and names that share its beginning: longer, shorter.
		keys = append(keys, k, k+"x", k+`"`)
		if k != "" {
			keys = append(keys, k[:len(k)-1])
		}
	}
	for _, k := range keys {
		want, wok := Field(obj, k)
		got, gok := x.Field(obj, k)
		if wok != gok || !bytes.Equal(want, got) {
			t.Fatalf("%s: Field(%q) = %s, %v; the Index's %s, %v", obj, k, want, wok, got, gok)
		}
	}
}

func TestAppendCompactCorpus(t *testing.T) {
	for _, s := range compactCorpus {
		checkCompact(t, []byte(s))
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	checkCompact(t, []byte(deep))
	checkCompact(t, []byte("["+deep+"]"))
}

// TestAppendCompactRandom compares AppendCompact with json.Compact on
// random JSON with random space, and on random damage done to it.
func TestAppendCompactRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := randomJSON(rng, 0)
		checkCompact(t, b)
		if len(b) > 0 {
			d := bytes.Clone(b)
			switch rng.IntN(3) {
			case 0:
				const chars = "{}[],:\"\\ 0-.eE+tfnu\x01"
				d[rng.IntN(len(d))] = chars[rng.IntN(len(chars))]
			case 1:
				d = d[:rng.IntN(len(d))]
			case 2:
				i := rng.IntN(len(d))
				d = append(d[:i:i], append([]byte{"{}[],:\" \\"[rng.IntN(9)]}, d[i:]...)...)
			}
			checkCompact(t, d)
		}
	}
}

// randomJSON returns a random JSON text with random space between tokens.
func randomJSON(rng *rand.Rand, depth int) []byte {
	sp := func() string { return []string{"", "", " ", "\n\t", "\r\n "}[rng.IntN(5)] }
	var b bytes.Buffer
	b.WriteString(sp())
	switch k := rng.IntN(10); {
	case depth < 4 && k < 2:
		b.WriteByte('{')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(sp() + "," + sp())
			}
			b.WriteString(sp() + randomString(rng) + sp() + ":")
			b.Write(randomJSON(rng, depth+1))
		}
		b.WriteString(sp() + "}")
	case depth < 4 && k < 4:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			b.Write(randomJSON(rng, depth+1))
		}
		b.WriteString(sp() + "]")
	case k < 6:
		b.WriteString(randomString(rng))
	case k < 8:
		b.WriteString([]string{"0", "-1", "12.5", "3e7", "-0.25E-3", "1e+2"}[rng.IntN(6)])
	default:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	}
	b.WriteString(sp())
	return b.Bytes()
}

func randomString(rng *rand.Rand) string {
	parts := []string{"a", "key", " ", `\n`, `\"`, `\\`, `\u00e9`, "é", "\u2028", `\/`, "\xff"}
	var s strings.Builder
	s.WriteByte('"')
	for range rng.IntN(5) {
		s.WriteString(parts[rng.IntN(len(parts))])
	}
	s.WriteByte('"')
	return s.String()
}

func FuzzAppendCompact(f *testing.F) {
	for _, s := range compactCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkCompact(t, src) })
}

func BenchmarkAppendCompact(b *testing.B) {
	src := []byte(`{"id":"metropolis-0001","state":"NODE_STATE_UP","status":{"external_address":"10.1.0.1","running_curator":{"port":7835}},"labels":{"pairs":[{"key":"rack","value":"r1"},{"key":"zone","value":"z1"}]},"jitter":"` + strings.Repeat("x", 300) + `"}`)
	var dst []byte
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"AppendCompact", func() { dst, _ = AppendCompact(dst[:0], src) }},
		{"json.Compact", func() {
			buf := bytes.NewBuffer(dst[:0])
			json.Compact(buf, src)
			dst = buf.Bytes()
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bc.fn()
			}
		})
	}
}

// BenchmarkAppendCompactLabels: a record of about 4 KiB that is mostly
// short strings (a node with dozens of feature labels), where the cost is
// per token rather than per byte.
func BenchmarkAppendCompactLabels(b *testing.B) {
	var s strings.Builder
	s.WriteString(`{"id":"metropolis-0001","state":"NODE_STATE_UP","status":{"external_address":"10.1.0.1","running_curator":{"port":7835},"timestamp":"2026-11-24T10:00:00.123456789Z"},"labels":{"pairs":[`)
	for i := 0; s.Len() < 4000; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, `{"key":"feature.node.kubernetes.io/cpu-cpuid.F%03d","value":"true"}`, i)
	}
	s.WriteString(`]},"tpm_usage":"TPM_USAGE_USED"}`)
	src := []byte(s.String())
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst, _, _ = AppendCompactIndexed(dst[:0], src)
	}
}
