package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// reference decodes b as nodewatch did before Decode: encoding/json with
// UseNumber, exactly one value.
func reference(b []byte) (any, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("invalid JSON")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// agree checks that Decode and the reference agree on b: both fail, or
// both give the same tree.
func agree(t *testing.T, b []byte) {
	t.Helper()
	want, werr := reference(b)
	got, gerr := Decode(b)
	in := string(b)
	if len(in) > 80 {
		in = in[:80] + "…"
	}
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: encoding/json error %v, Decode error %v", in, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nDecode       %#v\nencoding/json %#v", in, got, want)
	}
}

// genValue writes a random JSON value: the parts a decoder gets wrong
// (escapes, surrogates, invalid UTF-8, number forms, repeated keys, space).
func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	space := func() {
		for range r.Intn(3) {
			b.WriteByte(" \t\n\r"[r.Intn(4)])
		}
	}
	space()
	k := r.Intn(8)
	if depth > 4 {
		k = 2 + r.Intn(6)
	}
	// list writes up to three elements between open and end.
	list := func(open, end byte, elem func()) {
		b.WriteByte(open)
		for i := range r.Intn(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			elem()
		}
		space()
		b.WriteByte(end)
	}
	switch k {
	case 0:
		list('{', '}', func() {
			space()
			genString(r, b, 2) // few distinct keys: repeats happen
			space()
			b.WriteByte(':')
			genValue(r, b, depth+1)
		})
	case 1:
		list('[', ']', func() { genValue(r, b, depth+1) })
	case 2, 3:
		genString(r, b, 6)
	case 4, 5:
		ints := []string{"0", "-0", "7", "-12", "18446744073709551616", "1e3", "1E-2", "2.50", "-0.0e+0", "123456789.123456789"}
		b.WriteString(ints[r.Intn(len(ints))])
	default:
		b.WriteString([]string{"true", "false", "null"}[r.Intn(3)])
	}
	space()
}

func genString(r *rand.Rand, b *strings.Builder, alphabet int) {
	parts := []string{"a", "b", "é", "日本", `\"`, `\\`, `\/`, `\n`, `\t`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00x`, "\xff", "\xe2\x82", " "}
	b.WriteByte('"')
	for range r.Intn(5) {
		if alphabet < len(parts) && r.Intn(2) == 0 {
			b.WriteString(parts[r.Intn(alphabet)])
		} else {
			b.WriteString(parts[r.Intn(len(parts))])
		}
	}
	b.WriteByte('"')
}

// eachValue calls f with each of 20000 random values (see genValue), and
// the generator that made it.
func eachValue(f func(r *rand.Rand, in []byte)) {
	for seed := range int64(20000) {
		r := rand.New(rand.NewSource(seed))
		var b strings.Builder
		genValue(r, &b, 0)
		f(r, []byte(b.String()))
	}
}

// TestDecodeModel compares Decode with encoding/json on random values, and
// on the same values with a byte cut, changed or inserted.
func TestDecodeModel(t *testing.T) {
	eachValue(func(r *rand.Rand, in []byte) {
		agree(t, in)
		if len(in) == 0 {
			return
		}
		bad := bytes.Clone(in)
		i := r.Intn(len(bad))
		switch r.Intn(3) {
		case 0:
			bad = bad[:i]
		case 1:
			bad[i] = `{}[],:"\0-e.tfn x`[r.Intn(17)]
		default:
			bad = append(bad[:i], append([]byte{`{}[],:"\0-e.`[r.Intn(12)]}, bad[i:]...)...)
		}
		agree(t, bad)
	})
}

// TestCompactValid: CompactValid makes json.Compact's bytes of every valid
// random value.
func TestCompactValid(t *testing.T) {
	eachValue(func(_ *rand.Rand, in []byte) {
		if !json.Valid(in) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, in); err != nil {
			t.Fatal(err)
		}
		if got := CompactValid(bytes.Clone(in)); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("CompactValid(%q) = %q, want %q", in, got, want.Bytes())
		}
	})
}

func TestDecodeCases(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `}`, `[`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`,
		`+1`, `tru`, `nul`, `"a`, "\"a\x01\"", `"\x"`, `"\u12"`, `1 2`, `{} {}`, `[1 2]`,
		`{"a":{"b":[1,{"c":null}]},"a":true}`, `"\ud83d\ude00"`, "\"\xed\xa0\x80\"", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		agree(t, []byte(in))
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"\u00e9"}]}`, `"x\ud800"`, `-0.5e7`, `[]`, `{"k":null,"k":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { agree(t, b) })
}

func TestDocTreeAndJSON(t *testing.T) {
	d, err := Compact([]byte(` { "b" : [1, 2.0] , "a" : "x" } `))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.JSON()), `{"b":[1,2.0],"a":"x"}`; got != want {
		t.Errorf("JSON() = %s, want %s", got, want)
	}
	want := map[string]any{"a": "x", "b": []any{json.Number("1"), json.Number("2.0")}}
	if !reflect.DeepEqual(d.Tree(), want) || !reflect.DeepEqual(TreeOf(d), want) {
		t.Errorf("Tree() = %#v, want %#v", d.Tree(), want)
	}
	if _, err := Compact([]byte(`{"a":1} x`)); err == nil {
		t.Error("Compact accepted data after the value")
	}
	if !d.Equal(New([]byte(`{"b":[1,2.0],"a":"x"}`))) || d.Equal(New([]byte(`{"a":"x","b":[1,2.0]}`))) {
		t.Error("Equal does not compare encodings")
	}
}

func BenchmarkDecode(b *testing.B) {
	rec := []byte(`{"id":"metropolis-0a1b2c3d4e5f6071","state":"NODE_STATE_UP","status":{"external_address":"10.0.12.34","running_curator":{"port":7835},"version":{"release":{"major":"0","minor":"3"}}},"roles":{"kubernetes_worker":{},"consensus_member":{"peers":[{"url":"https://10.0.12.34:7834"}]}},"labels":{"pairs":[{"key":"pod","value":"pod-17"}]}}`)
	b.Run("doc", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Decode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := reference(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
