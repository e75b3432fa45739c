package gobjson

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The types below have the shape of mgmt's resources (engine.Base and
// its parts, resources.FileRes, resources.SvcRes) without importing mgmt;
// they are registered under mgmt's names, which is all a gob stream
// carries of them.

type Kinded struct{ Xkind string }
type Named struct{ Xname string }

type MetaParams struct {
	AutoEdge  bool
	AutoGroup bool
	Noop      bool
	Retry     int16
	Delay     uint64
	Poll      uint32
	Limit     float64
	Burst     int
	Sema      []string
	Rewatch   bool
	Realize   bool
	Export    []string
}

type Meta struct{ Xmeta *MetaParams }

type Base struct {
	Kinded
	Named
	Meta
}

// Res stands for mgmt's engine.Res: an interface, so that the stream
// names the concrete type.
type Res interface{ kind() string }

type FileRes struct {
	Base
	Path     string
	Dirname  string
	Basename string
	Content  *string
	Source   string
	State    string
	Recurse  bool
	Force    bool
	Owner    string
	Group    string
	Mode     string
}

type SvcRes struct {
	Base
	State   string
	Startup string
	Session bool
	Type    string
}

// TestRes is a resource with every kind of field: nested structs, slices
// of structs, maps, an interface inside, numbers at their limits, bytes.
type TestRes struct {
	Base
	Bools   []bool
	Int64   int64
	Uint64  uint64
	Float   float64
	Complex complex128
	Bytes   []byte
	Strings [2]string
	Edges   []Edge
	Labels  map[string]string
	Weights map[int]float32
	Any     any
	Nothing any
	Nested  *Edge
	Unsent  string // zero: gob leaves it out
	Escaped string
}

type Edge struct {
	From, To string
	Notify   bool
}

func (*FileRes) kind() string { return "file" }
func (*SvcRes) kind() string  { return "svc" }
func (*TestRes) kind() string { return "test" }

func init() {
	gob.RegisterName("*resources.FileRes", &FileRes{})
	gob.RegisterName("*resources.SvcRes", &SvcRes{})
	gob.RegisterName("*resources.TestRes", &TestRes{})
	gob.RegisterName("main.Edge", Edge{})
}

// encode returns the gob of res as mgmt writes it (engine/util ResToB64):
// gob.NewEncoder(&b).Encode(&res), then standard base64.
func encode(t testing.TB, res Res) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&res); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b.Bytes()))
}

func base(kind, name string, export ...string) Base {
	return Base{Kinded{kind}, Named{name}, Meta{&MetaParams{AutoEdge: true, AutoGroup: true, Limit: math.Inf(1), Burst: 0, Export: export}}}
}

func fixtures() map[string]Res {
	content := "hello\nworld\n"
	return map[string]Res{
		"file": &FileRes{Base: base("file", "/tmp/foo", "*"), Path: "/tmp/foo", Content: &content, State: "exists", Mode: "0644"},
		"svc":  &SvcRes{Base: base("svc", "nginx", "h2", "h3"), State: "running", Startup: "enabled"},
		"test": &TestRes{
			Base:    base("test", "t1"),
			Bools:   []bool{true, false},
			Int64:   math.MinInt64,
			Uint64:  math.MaxUint64,
			Float:   -0.5,
			Complex: complex(1, -2),
			Bytes:   []byte{0xff, 0, 1},
			Strings: [2]string{"", "b"},
			Edges:   []Edge{{From: "a", To: "b", Notify: true}, {}},
			Labels:  map[string]string{"zone": "eu"},
			Weights: map[int]float32{7: 0.25},
			Any:     Edge{From: "x"},
			Nested:  &Edge{To: "y"},
			Escaped: "quote \" backslash \\ tab \t bad \xff",
		},
	}
}

// TestDecodeFixtures: mgmt-shaped resources, encoded by encoding/gob,
// decode to the golden JSON in testdata/.
func TestDecodeFixtures(t *testing.T) {
	for name, res := range fixtures() {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeBase64(encode(t, res))
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, got, "", "  ")
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if pretty.String() != string(want) {
				t.Errorf("decoded %s:\n%s\nwant (%s):\n%s", name, pretty.String(), path, want)
			}
		})
	}
}

// TestDecodeValues: values that are not resources: a top-level struct,
// basic values (sent as singletons), and several values in one stream (the
// first counts).
func TestDecodeValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Edge{From: "a"}, `{"From":"a"}`},
		{42, `42`},
		{"s", `"s"`},
		{[]string{"a", ""}, `["a",""]`},
		{map[string]int{"k": 0}, `{"k":0}`},
		{true, `true`},
		{[]any{1, "x", nil}, `[{"type":"int","value":1},{"type":"string","value":"x"},null]`},
	} {
		var b bytes.Buffer
		enc := gob.NewEncoder(&b)
		if err := enc.Encode(c.v); err != nil {
			if c.want == "" {
				continue
			}
			t.Fatal(err)
		}
		enc.Encode(c.v) // a second value, ignored
		got, err := Decode(b.Bytes())
		if err != nil || string(got) != c.want {
			t.Errorf("Decode(gob of %#v) = %s, %v; want %s", c.v, got, err, c.want)
		}
	}
}

// TestDecodeErrors: every cut of a valid stream, and a few bad bytes,
// fail with an error, never a panic.
func TestDecodeErrors(t *testing.T) {
	raw, _ := base64.StdEncoding.DecodeString(string(encode(t, fixtures()["test"])))
	for i := range len(raw) {
		if _, err := Decode(raw[:i]); err == nil {
			t.Errorf("a stream cut at %d of %d decoded", i, len(raw))
		}
		bad := bytes.Clone(raw)
		bad[i] ^= 0xff
		Decode(bad) // must not panic
	}
	for _, in := range []string{"", "\x00", "\x01\x7f", "\x03\xff\xff\xff", "\x02\x81\x00"} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) succeeded", in)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, res := range fixtures() {
		raw, _ := base64.StdEncoding.DecodeString(string(encode(f, res)))
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Decode(b)
		if err == nil && !json.Valid(out) {
			t.Fatalf("Decode(%q) = %s: not JSON", b, out)
		}
		if err != nil && strings.Contains(err.Error(), "runtime error") {
			t.Fatal(err)
		}
	})
}
