package etcdkv

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/jsondoc"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeValueModes(t *testing.T) {
	b64 := func(s string) any { return map[string]any{"base64": s} }
	tests := []struct {
		name    string
		in      string
		mode    ValueMode
		want    any
		wantErr bool
	}{
		{"auto object", `{"a":1}`, ValueAuto, map[string]any{"a": json.Number("1")}, false},
		{"auto big number stays exact", `123456789012345678901234567890.5`, ValueAuto, json.Number("123456789012345678901234567890.5"), false},
		{"auto text", `hello`, ValueAuto, "hello", false},
		{"auto empty", ``, ValueAuto, "", false},
		{"auto two JSON values is text", `1 2`, ValueAuto, "1 2", false},
		{"auto binary", "\xff\x00", ValueAuto, b64("/wA="), false},
		{"auto JSON string with bad UTF-8 is binary", "\"\xff\"", ValueAuto, b64("Iv8i"), false},
		{"json ok", `[true,null]`, ValueJSON, []any{true, nil}, false},
		{"json rejects text", `hello`, ValueJSON, nil, true},
		{"json rejects bad UTF-8 in an object", "{\"a\":[\"\xff\"]}", ValueJSON, nil, true},
		{"auto object with bad UTF-8 is binary", "{\"a\":\"\xc3\"}", ValueAuto, b64("eyJhIjoiwyJ9"), false},
		{"text keeps JSON as a string", `{"a":1}`, ValueText, `{"a":1}`, false},
		{"text rejects binary", "\xff", ValueText, nil, true},
		{"base64", "\xff\x00", ValueBase64, "/wA=", false},
		{"query", "maxCount=1&persist=false&sessionTTL=10&strategy=rr", ValueQuery, map[string]any{"maxCount": "1", "persist": "false", "sessionTTL": "10", "strategy": "rr"}, false},
		{"query repeated and escaped", "h=a&h=b%20c&empty=", ValueQuery, map[string]any{"h": []any{"a", "b c"}, "empty": ""}, false},
		{"query rejects a bad escape", "a=%zz", ValueQuery, nil, true},
		{"gob, base64-wrapped (mgmt)", gobB64(true), ValueGob, map[string]any{"From": "a", "Notify": true}, false},
		{"gob, raw", gobB64(false), ValueGob, map[string]any{"From": "a", "Notify": true}, false},
		{"gob rejects other bytes", "not gob", ValueGob, nil, true},
		{"auto never guesses gob", gobB64(true), ValueAuto, gobB64(true), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := valueTree([]byte(tt.in), tt.mode)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

// gobB64 is the gob of a struct, base64-wrapped as mgmt stores values, or
// raw.
func gobB64(wrapped bool) string {
	var b bytes.Buffer
	gob.NewEncoder(&b).Encode(struct {
		From   string
		Notify bool
	}{"a", true})
	if wrapped {
		return base64.StdEncoding.EncodeToString(b.Bytes())
	}
	return b.String()
}

// valueTree is the tree of the JSON appendValue makes.
func valueTree(b []byte, mode ValueMode) (any, error) {
	out, _, err := appendValue(nil, b, mode, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return jsondoc.Decode(out)
}

func TestObject(t *testing.T) {
	kv := &mvccpb.KeyValue{Key: []byte("/n/a"), Value: []byte(` {"b": 1.50, "a" : [true]} `), CreateRevision: 3, ModRevision: 7, Version: 2, Lease: 9}
	d, err := Object(kv, ValueAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"create_revision":3,"key":"/n/a","lease":9,"mod_revision":7,"value":{"b":1.50,"a":[true]},"version":2}`
	if string(d.JSON()) != want {
		t.Errorf("Object = %s, want %s", d.JSON(), want)
	}
	// The value is where Object says it put it, in every mode.
	for _, mode := range []ValueMode{ValueAuto, ValueJSON, ValueText, ValueBase64} {
		d, err := Object(kv, mode, []Field{{Name: "n", Value: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		got, gok := d.Member("value")
		want, wok := jsondoc.Field(d.JSON(), "value")
		if gok != wok || string(got) != string(want) {
			t.Errorf("mode %v: Member(value) = %s, Field says %s", mode, got, want)
		}
		checkMembers(t, d)
	}
	// Past 64 KiB, no Index.
	big := &mvccpb.KeyValue{Key: []byte("/n/big"), Value: []byte(`"` + strings.Repeat("x", 70000) + `"`)}
	if d, err := Object(big, ValueAuto, nil); err != nil || d.Members() != nil {
		t.Errorf("a record of 70 kB: Members %v, error %v", d.Members(), err)
	}
	kv.Key = []byte("\xff")
	if d, _ := Object(kv, ValueText, nil); !strings.Contains(string(d.JSON()), `"key":{"base64":"/w=="}`) {
		t.Errorf("binary key: %s", d.JSON())
	}
}

func TestParseValueMode(t *testing.T) {
	for _, s := range []string{"auto", "json", "text", "base64", "gob", "query"} {
		if _, err := ParseValueMode(s); err != nil {
			t.Errorf("ParseValueMode(%q): %v", s, err)
		}
	}
	if _, err := ParseValueMode("hex"); err == nil {
		t.Error("ParseValueMode(hex): no error")
	}
}

// TestObjectFromModel: whatever object it is given as the key's earlier
// state (nil, an earlier state, another key's, a value that was no
// object), ObjectFrom makes what Object makes, byte for byte, with the
// same Index and the same error. The watcher's cache of last states can
// then only make decoding faster, never different.
func TestObjectFromModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	base := []string{
		`{"id":"n1","state":"UP","status":{"beat":1,"addr":"10.0.0.1"},"labels":{"pairs":[{"key":"a","value":"true"}]}}`,
		`{"id":"n1","state":"DOWN","status":{"beat":2,"addr":"10.0.0.1"},"labels":{"pairs":[{"key":"a","value":"true"}]}}`,
		`{"id":"n1", "state":"UP","status":{"beat":3}}`,
		`{"a":1}`, `{}`, `[1,2]`, `"s"`, `not json`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`,
		// The first with a byte that is not UTF-8 in what changed.
		"{\"id\":\"n1\",\"state\":\"U\xffP\",\"status\":{\"beat\":1,\"addr\":\"10.0.0.1\"},\"labels\":{\"pairs\":[{\"key\":\"a\",\"value\":\"true\"}]}}",
	}
	value := func() []byte {
		v := []byte(base[rng.IntN(len(base))])
		for range rng.IntN(3) { // a few edits anywhere
			i := rng.IntN(len(v) + 1)
			c := []byte(`{}[]",: 0a\`)[rng.IntN(11)]
			if rng.IntN(2) == 0 {
				v = slices.Insert(v, i, c)
			} else if i < len(v) {
				v[i] = c
			}
		}
		return v
	}
	for range 20000 {
		mode := []ValueMode{ValueAuto, ValueJSON, ValueText}[rng.IntN(3)]
		kv := &mvccpb.KeyValue{Key: []byte("/n/1"), Value: value(), ModRevision: 9, CreateRevision: 2, Version: 3}
		var ref any
		switch rng.IntN(4) {
		case 1, 2:
			if d, err := Object(&mvccpb.KeyValue{Key: []byte("/n/" + strconv.Itoa(rng.IntN(2))), Value: value()}, ValueAuto, nil); err == nil {
				ref = d
			}
		case 3:
			ref = "not a Doc"
		}
		want, werr := Object(kv, mode, nil)
		got, gerr := ObjectFrom(kv, mode, nil, ref)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("%q: error %v, Object's %v", kv.Value, gerr, werr)
		}
		if werr != nil {
			continue
		}
		wn, wv, wx := want.Known()
		gn, gv, gx := got.Known()
		if !bytes.Equal(got.JSON(), want.JSON()) || wn != gn || !bytes.Equal(wv, gv) || !slices.Equal(wx, gx) || (wx == nil) != (gx == nil) {
			t.Fatalf("%q from %v:\n got %s %v\nwant %s %v", kv.Value, ref, got.JSON(), gx, want.JSON(), wx)
		}
		checkMembers(t, got)
		checkMembers(t, want)
	}
}

// checkMembers: the Index that Object gives its object (Doc.Members) is
// the one AppendCompactIndexed makes of it.
func checkMembers(t *testing.T, d *jsondoc.Doc) {
	t.Helper()
	_, x, err := jsondoc.AppendCompactIndexed(nil, d.JSON())
	if err != nil {
		x = nil // no Index where the encoding is not UTF-8
	}
	if got := d.Members(); !slices.Equal(got, x) || (err == nil && got == nil) {
		t.Fatalf("%s: Members %v, want %v", d.JSON(), got, x)
	}
}

// TestAppendInt holds appendInt to strconv.AppendInt: the edges of each
// digit count and of its fast path, and random values of every size.
func TestAppendInt(t *testing.T) {
	ns := []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1e17 - 1, 1e17, 1e18 - 1, 1e18, math.MaxInt64, -1, -10, math.MinInt64}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		ns = append(ns, rng.Int64()>>rng.IntN(64), -rng.Int64()>>rng.IntN(64))
	}
	for _, n := range ns {
		if got, want := string(appendInt([]byte("x"), n)), string(strconv.AppendInt([]byte("x"), n, 10)); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestDiffEveryMember: the changed paths of two objects of a key name
// every member that differs, the first (create_revision, which differs
// when a relisting finds the key made again) and the last among them.
func TestDiffEveryMember(t *testing.T) {
	kv := func(create, mod, version, lease int64, value string) *jsondoc.Doc {
		d, err := ObjectFrom(&mvccpb.KeyValue{Key: []byte("/k"), Value: []byte(value),
			CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}, ValueAuto, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := kv(2, 5, 3, 0, `{"state":"UP","n":1}`)
	for _, c := range []struct {
		b    *jsondoc.Doc
		want string
	}{
		{kv(7, 7, 1, 0, `{"state":"UP","n":1}`), `[[create_revision] [mod_revision] [version]]`},
		{kv(2, 6, 4, 9, `{"state":"UP","n":1}`), `[[lease] [mod_revision] [version]]`},
		{kv(2, 6, 4, 0, `{"state":"UP","n":2}`), `[[mod_revision] [value n] [version]]`},
		{kv(9, 9, 1, 0, `{"state":"DOWN","n":1}`), `[[create_revision] [mod_revision] [value state] [version]]`},
	} {
		if got := fmt.Sprint(jsondoc.Diff(a, c.b)); got != c.want {
			t.Errorf("Diff(%s, %s) = %s, want %s", a.JSON(), c.b.JSON(), got, c.want)
		}
	}
}
