// Package mgmttest is test scaffolding: it makes what tests need of mgmt
// (the config management engine) without mgmt's code: resources of the
// shape of mgmt's (engine.Base and its parts, resources.FileRes,
// resources.SvcRes), registered with encoding/gob under mgmt's names,
// which is all a gob stream carries of them, and encoded as mgmt stores
// them in etcd.
package mgmttest

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"math"
	"testing"
)

// Kinded, Named, MetaParams, Meta and Base are engine.Base and its parts.
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

// FileRes is resources.FileRes.
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

// SvcRes is resources.SvcRes.
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

// Edge is a struct in an interface and in slices.
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

// ResToB64 returns the gob of res as mgmt writes it (engine/util
// ResToB64): gob.NewEncoder(&b).Encode(&res), then standard base64.
func ResToB64(t testing.TB, res Res) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&res); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b.Bytes()))
}

// NewBase returns the Base of a resource of kind and name, exported to
// the hosts export names.
func NewBase(kind, name string, export ...string) Base {
	return Base{Kinded{kind}, Named{name}, Meta{&MetaParams{AutoEdge: true, AutoGroup: true, Limit: math.Inf(1), Burst: 0, Export: export}}}
}

// Fixtures are a file, a service, and a resource with every kind of
// field, by name.
func Fixtures() map[string]Res {
	content := "hello\nworld\n"
	return map[string]Res{
		"file": &FileRes{Base: NewBase("file", "/tmp/foo", "*"), Path: "/tmp/foo", Content: &content, State: "exists", Mode: "0644"},
		"svc":  &SvcRes{Base: NewBase("svc", "nginx", "h2", "h3"), State: "running", Startup: "enabled"},
		"test": &TestRes{
			Base:    NewBase("test", "t1"),
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
