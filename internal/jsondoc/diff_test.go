package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// naiveDiff is the model of Diff: encoding/json splits the values (last
// key wins, keys unescaped), scalars are compared by their encodings, keys
// visited in sorted order. It shares no code with Diff.
func naiveDiff(a, b json.RawMessage, path Path, out *[]Path) {
	if bytes.Equal(a, b) {
		return
	}
	var oa, ob map[string]json.RawMessage
	if json.Unmarshal(a, &oa) == nil && json.Unmarshal(b, &ob) == nil && oa != nil && ob != nil {
		var keys []string
		for k := range oa {
			keys = append(keys, k)
		}
		for k := range ob {
			if _, ok := oa[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			va, ina := oa[k]
			vb, inb := ob[k]
			p := append(slices.Clone(path), k)
			if ina && inb {
				naiveDiff(va, vb, p, out)
			} else {
				*out = append(*out, p)
			}
		}
		return
	}
	var la, lb []json.RawMessage
	if json.Unmarshal(a, &la) == nil && json.Unmarshal(b, &lb) == nil && la != nil && lb != nil && len(la) == len(lb) {
		for i := range la {
			naiveDiff(la[i], lb[i], append(slices.Clone(path), i), out)
		}
		return
	}
	*out = append(*out, slices.Clone(path))
}

// jv is a JSON value for generating pairs that share structure: an object
// (keys, vals), an array (vals) or a scalar (its encoding).
type jv struct {
	kind byte // 'o', 'a' or 's'
	raw  string
	keys []string
	vals []*jv
}

var (
	genKeys    = []string{"a", "b", "state", "x.y", "é", `q"uote`, "", "a b"}
	genScalars = []string{`0`, `1`, `1.0`, `-0`, `1e3`, `"a"`, `"b"`, `"\u00e9"`, `"é"`, `""`, `true`, `false`, `null`, `"x\\y"`}
)

func genJV(r *rand.Rand, depth int) *jv {
	k := r.Intn(5)
	if depth > 3 {
		k = 4
	}
	switch k {
	case 0, 1:
		v := &jv{kind: 'o'}
		for _, i := range r.Perm(len(genKeys))[:r.Intn(5)] {
			v.keys = append(v.keys, genKeys[i])
			v.vals = append(v.vals, genJV(r, depth+1))
		}
		return v
	case 2:
		v := &jv{kind: 'a'}
		for range r.Intn(4) {
			v.vals = append(v.vals, genJV(r, depth+1))
		}
		return v
	}
	return &jv{kind: 's', raw: genScalars[r.Intn(len(genScalars))]}
}

// mutate returns a copy of v with random changes.
func mutate(r *rand.Rand, v *jv, depth int) *jv {
	if r.Intn(8) == 0 {
		return genJV(r, depth) // replaced, often by another kind
	}
	c := &jv{kind: v.kind, raw: v.raw, keys: slices.Clone(v.keys)}
	for _, e := range v.vals {
		if r.Intn(3) == 0 {
			e = mutate(r, e, depth+1)
		}
		c.vals = append(c.vals, e)
	}
	switch {
	case c.kind == 'o' && r.Intn(4) == 0 && len(c.keys) > 0: // remove a member
		i := r.Intn(len(c.keys))
		c.keys = slices.Delete(c.keys, i, i+1)
		c.vals = slices.Delete(c.vals, i, i+1)
	case c.kind == 'o' && r.Intn(4) == 0: // add a member
		k := genKeys[r.Intn(len(genKeys))]
		if !slices.Contains(c.keys, k) {
			c.keys = append(c.keys, k)
			c.vals = append(c.vals, genJV(r, depth+1))
		}
	case c.kind == 'a' && r.Intn(4) == 0: // grow or shrink
		if len(c.vals) > 0 && r.Intn(2) == 0 {
			c.vals = c.vals[:len(c.vals)-1]
		} else {
			c.vals = append(c.vals, genJV(r, depth+1))
		}
	}
	return c
}

// encodeOrdered writes v compactly, members in a random order (in v's
// order if ordered, as one serializer writes two states of a record:
// what Differ.pairwise takes), now and then after a decoy member with
// the same key and a random value (which the last one overrides).
func encodeOrdered(r *rand.Rand, v *jv, b *strings.Builder, ordered bool) {
	switch v.kind {
	case 's':
		b.WriteString(v.raw)
	case 'a':
		b.WriteByte('[')
		for i, e := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeOrdered(r, e, b, ordered)
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		order := r.Perm(len(v.keys))
		if ordered {
			slices.Sort(order)
		}
		for n, i := range order {
			if n > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(v.keys[i])
			decoy := r.Intn(10)
			if decoy == 0 {
				fmt.Fprintf(b, `%s:%s,`, spelt(r, key), genScalars[r.Intn(len(genScalars))])
			}
			b.Write(key)
			b.WriteByte(':')
			encodeOrdered(r, v.vals[i], b, ordered)
			if decoy == 1 { // after: the decoy's value counts
				fmt.Fprintf(b, `,%s:%s`, spelt(r, key), genScalars[r.Intn(len(genScalars))])
			}
		}
		b.WriteByte('}')
	}
}

// spelt returns the quoted key q as it is, or, half the time, with its
// first character written as an escape: the same key, other bytes.
func spelt(r *rand.Rand, q []byte) []byte {
	if len(q) < 3 || q[1] >= utf8.RuneSelf || q[1] == '\\' || r.Intn(2) == 0 {
		return q
	}
	return fmt.Appendf(nil, `"\u%04x%s`, q[1], q[2:])
}

// checkDiff compares Diff with the model on a and b, and checks what At
// finds at each path.
func checkDiff(t *testing.T, a, b []byte) {
	t.Helper()
	var want []Path
	naiveDiff(a, b, Path{}, &want)
	got := Diff(New(a), New(b))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Diff(%s, %s) (-model +Diff):\n%s", a, b, diff)
	}
	// The same values as an etcd key's object holds them, its value's
	// place known and indexed (NewIndexed): the paths are the value's,
	// under "value", and the model's on the whole objects.
	wrapped := func(v []byte) string {
		// The first member and the one after the value differ with the
		// value's length, so that a walk that skips the first member or
		// loses its place after the value shows; the first one's key
		// too, so that the walk of the makers' Indexes meets keys that
		// differ.
		first := "first"
		if len(v)%3 == 0 {
			first = "fields"
		}
		return fmt.Sprintf(`{"%s":%d,"key":"k","value":%s,"version":%d}`, first, len(v), v, len(v))
	}
	wrap := func(v []byte) *Doc {
		w := wrapped(v)
		start := strings.Index(w, `"value":`) + len(`"value":`)
		_, x, err := AppendCompactIndexed(nil, v) // v is compact: the same offsets
		if err != nil && utf8.Valid(v) {
			t.Fatal(err)
		} // else no Index: one is made only of valid UTF-8
		return NewIndexed([]byte(w), "value", start, start+len(v), x)
	}
	var want2 []Path
	naiveDiff([]byte(wrapped(a)), []byte(wrapped(b)), Path{}, &want2)
	if diff := cmp.Diff(want2, Diff(wrap(a), wrap(b))); diff != "" {
		t.Fatalf("Diff of %s and %s as values (-model +Diff):\n%s", a, b, diff)
	}
	// The same, with the objects' own Index too, as etcdkv.Object gives
	// it: the walk reads it instead of the members.
	withMembers := func(v []byte) *Doc {
		d := wrap(v)
		_, x, err := AppendCompactIndexed(nil, d.JSON())
		if err != nil {
			return d // no Index: one is made only of valid UTF-8
		}
		return d.SetMembers(x)
	}
	if diff := cmp.Diff(want2, Diff(withMembers(a), withMembers(b))); diff != "" {
		t.Fatalf("Diff of %s and %s as values, the objects indexed (-model +Diff):\n%s", a, b, diff)
	}
	for _, p := range got {
		va, oka := At(New(a), p)
		vb, okb := At(New(b), p)
		if oka && okb && bytes.Equal(va, vb) {
			t.Fatalf("Diff(%s, %s): %v holds %s on both sides", a, b, p, va)
		}
	}
}

// TestDiffModel: Diff agrees with the model on random pairs of related
// values, in random member order, with repeated keys.
func TestDiffModel(t *testing.T) {
	for seed := range int64(20000) {
		r := rand.New(rand.NewSource(seed))
		a := genJV(r, 0)
		b := mutate(r, a, 0)
		// Half the pairs in one member order (as one serializer writes
		// them), half in orders of their own.
		// In one order, the decoys (keys given twice) mostly in the same
		// places too, so that a and b differ in one value beside them.
		ordered := seed%2 == 0
		ra, rb := r, r
		if ordered {
			ra, rb = rand.New(rand.NewSource(-seed)), rand.New(rand.NewSource(-seed))
		}
		var ea, eb strings.Builder
		encodeOrdered(ra, a, &ea, ordered)
		encodeOrdered(rb, b, &eb, ordered)
		checkDiff(t, []byte(ea.String()), []byte(eb.String()))
	}
}

// TestDiffReused: one Differ used for pair after pair, as an encoder
// uses it (its key table, its scratch and the paths of the call before),
// gives what a new one gives, plain and with both Indexes.
func TestDiffReused(t *testing.T) {
	var d Differ
	// As an etcd key's object: the value known and indexed, the object
	// indexed too (Members), so that the walks read both Indexes.
	indexed := func(v []byte) *Doc {
		_, x, err := AppendCompactIndexed(nil, v)
		if err != nil {
			x = nil
		}
		pre := fmt.Sprintf(`{"first":%d,"key":"k","value":`, len(v))
		d := NewIndexed([]byte(pre+string(v)+fmt.Sprintf(`,"version":%d}`, len(v))), "value", len(pre), len(pre)+len(v), x)
		if _, mx, err := AppendCompactIndexed(nil, d.JSON()); err == nil {
			d.SetMembers(mx)
		}
		return d
	}
	for seed := range int64(5000) {
		r := rand.New(rand.NewSource(seed))
		a := genJV(r, 0)
		b := mutate(r, a, 0)
		var ea, eb strings.Builder
		encodeOrdered(r, a, &ea, seed%2 == 0)
		encodeOrdered(r, b, &eb, seed%2 == 0)
		for _, mk := range []func([]byte) *Doc{New, indexed} {
			da, db := mk([]byte(ea.String())), mk([]byte(eb.String()))
			want := Diff(da, db)
			if diff := cmp.Diff(want, d.Diff(da, db)); diff != "" {
				t.Fatalf("Diff(%s, %s), reused (-new +reused):\n%s", ea.String(), eb.String(), diff)
			}
		}
	}
}

func TestDiffCases(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want []Path
	}{
		{`{"a":1}`, `{"a":1}`, nil},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, nil},
		{`{"a":1}`, `{"a":2}`, []Path{{"a"}}},
		{`{"s":{"x":"1","y":"2"}}`, `{"s":{"x":"1","y":"3"},"n":true}`, []Path{{"n"}, {"s", "y"}}},
		{`{"r":[1,2,3]}`, `{"r":[1,5,3]}`, []Path{{"r", 1}}},
		{`{"r":[1,2,3]}`, `{"r":[1,2]}`, []Path{{"r"}}},
		{`"old"`, `"new"`, []Path{{}}},
		{`{"a":{}}`, `{"a":[]}`, []Path{{"a"}}},
		{`{"a":1}`, `{"a":1.0}`, []Path{{"a"}}},
		{`{"a\u0062":1}`, `{"ab":2}`, []Path{{"ab"}}},
		// The bytes that differ are inside "ab" in a, but open a member
		// in b.
		{`{"k":"ab"}`, `{"k":"a","z":"b"}`, []Path{{"k"}, {"z"}}},
		{`{"s":{"k":"ab"},"t":1}`, `{"s":{"k":"a","z":"b"},"t":1}`, []Path{{"s", "k"}, {"s", "z"}}},
		// Over several members of an inner object: their keys must
		// pair up, and none that differs may be given again after them
		// (the last counts), spelt as it is or with an escape.
		{`{"s":{"a":1,"b":2},"t":0}`, `{"s":{"a":5,"c":2},"t":0}`, []Path{{"s", "a"}, {"s", "b"}, {"s", "c"}}},
		{`{"s":{"a":1,"b":2,"b":2},"t":0}`, `{"s":{"a":5,"b":3,"b":2},"t":0}`, []Path{{"s", "a"}}},
		{`{"s":{"a":1,"b":2,"\u0062":2},"t":0}`, `{"s":{"a":5,"b":3,"\u0062":2},"t":0}`, []Path{{"s", "a"}}},
		{`{"s":{"a":1,"b":2,"c":3},"t":0}`, `{"s":{"a":5,"b":2,"c":4},"t":0}`, []Path{{"s", "a"}, {"s", "c"}}},
	} {
		if got := Diff(New([]byte(c.a)), New([]byte(c.b))); !cmp.Equal(c.want, got) {
			t.Errorf("Diff(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestAt(t *testing.T) {
	d := New([]byte(`{"a":{"b":[10,{"c":"x"}]},"a":{"b":[1,{"c":"y"}]}}`))
	for _, c := range []struct {
		p    Path
		want string
	}{
		{Path{}, string(d.JSON())},
		{Path{"a", "b", 0}, `1`},
		{Path{"a", "b", 1, "c"}, `"y"`},
		{Path{"a", "b", 2}, ""},
		{Path{"a", "x"}, ""},
		{Path{"a", "b", 0, "z"}, ""},
		{Path{"a", 0}, ""},
	} {
		got, ok := At(d, c.p)
		if string(got) != c.want || ok != (c.want != "") {
			t.Errorf("At(%v) = %s, %v; want %s", c.p, got, ok, c.want)
		}
	}
}

// FuzzDiff: on any two JSON values (compacted, as Docs are), Diff agrees
// with the model.
func FuzzDiff(f *testing.F) {
	f.Add(`{"a":[1,2,{"b":"\u00e9"}]}`, `{"a":[1,3,{"b":"é"}],"c":null}`)
	f.Add(`{"k":null,"k":1}`, `{"k":1}`)
	f.Add(`[1,[2]]`, `[1,[2,3]]`)
	f.Add(`"x"`, `{"x":1}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var ca, cb bytes.Buffer
		if json.Compact(&ca, []byte(a)) != nil || json.Compact(&cb, []byte(b)) != nil {
			return
		}
		checkDiff(t, ca.Bytes(), cb.Bytes())
	})
}

func BenchmarkDiff(b *testing.B) {
	prev := New([]byte(`{"id":"metropolis-4f2a","roles":{"kubernetes_worker":{}},"state":"NODE_STATE_UP","status":{"external_address":"10.0.0.1","running_curator":{"port":7835},"timestamp":"2026-01-02T03:04:05Z"},"labels":{"pairs":[{"key":"zone","value":"a"}]}}`))
	obj := New([]byte(`{"id":"metropolis-4f2a","roles":{"kubernetes_worker":{}},"state":"NODE_STATE_UP","status":{"external_address":"10.0.0.2","running_curator":{"port":7835},"timestamp":"2026-01-02T03:04:06Z"},"labels":{"pairs":[{"key":"zone","value":"a"}]}}`))
	b.ReportAllocs()
	var d Differ
	for b.Loop() {
		d.Diff(prev, obj)
	}
}

// Len reads JSON with whitespace too, as json.Valid accepts it.
func TestLenSpaced(t *testing.T) {
	for in, want := range map[string]int{
		`{ "a" : 1 , "b" : [ 1 , 2 ] }`:       2,
		"{\n\t\"a\":\n{\"x\": 1},\"a\" :2\n}": 1,
		`[ 1 , { "a" : 2 } , "x" ]`:           3,
		`{ }`:                                 0,
		`"s"`:                                 0,
	} {
		if !json.Valid([]byte(in)) {
			t.Fatalf("%s is not JSON", in)
		}
		if got := Len([]byte(in)); got != want {
			t.Errorf("Len(%s) = %d, want %d", in, got, want)
		}
	}
}
