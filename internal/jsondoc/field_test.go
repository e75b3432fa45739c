package jsondoc

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestFieldAgreesWithMembers checks Field against members (which sorts
// members and keeps the last of a key given twice, as the Differ reads
// objects) on random objects, their keys escaped, repeated and beyond
// ASCII.
func TestFieldAgreesWithMembers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []string{`"a"`, `"b"`, `"\u0061"`, `"é"`, `"\u00e9"`, `"a\"b"`, `""`}
	names := []string{"a", "b", "é", `a"b`, "", "c"}
	for range 5000 {
		var src bytes.Buffer
		src.WriteByte('{')
		for i := range rng.IntN(5) {
			if i > 0 {
				src.WriteByte(',')
			}
			src.WriteString(keys[rng.IntN(len(keys))] + ":")
			src.Write(randomJSON(rng, 2))
		}
		src.WriteByte('}')
		b, err := AppendCompact(nil, src.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		// A Doc that knows where its one member "a" is, when it has one.
		known := New(b)
		if v, ok := Field(b, "a"); ok && bytes.Count(b, []byte(`"a"`)) == 1 && bytes.Contains(b, []byte(`"a":`)) && !bytes.Contains(b, []byte(`\u0061`)) {
			start := bytes.Index(b, []byte(`"a":`)) + len(`"a":`)
			known = NewKnowing(b, "a", start, start+len(v))
		}
		for _, name := range names {
			kgot, kok := known.Member(name)
			got, gok := Field(b, name)
			if kok != gok || !bytes.Equal(kgot, got) {
				t.Fatalf("Member(%s, %q) = %s, %v; Field says %s, %v", b, name, kgot, kok, got, gok)
			}
			var want []byte
			wok := false
			for _, m := range members(b, nil) {
				if string(m.key) == name {
					want, wok = m.val, true
				}
			}
			if gok != wok || !bytes.Equal(got, want) {
				t.Fatalf("Field(%s, %q) = %s, %v; members say %s, %v", b, name, got, gok, want, wok)
			}
		}
	}
	for _, s := range []string{`[1]`, `"a"`, `null`, `1`} {
		if _, ok := Field([]byte(s), "a"); ok {
			t.Errorf("Field(%s) found a member", s)
		}
	}
}

func TestSameField(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"rev":1,"value":{"x":1}}`, `{"rev":2,"value":{"x":1}}`, true},
		{`{"value":{"x":1,"y":2}}`, `{"value":{"y":2,"x":1}}`, false}, // bytes, not jq values
		{`{"value":1}`, `{"other":1}`, false},
		{`{"a":1}`, `{"b":1}`, true}, // neither has one
	} {
		if got := SameField(New([]byte(c.a)), New([]byte(c.b)), "value"); got != c.same {
			t.Errorf("SameField(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
