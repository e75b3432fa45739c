package gobjson

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit/mgmttest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestDecodeFixtures: mgmt-shaped resources, encoded by encoding/gob,
// decode to the golden JSON in testdata/.
func TestDecodeFixtures(t *testing.T) {
	for name, res := range mgmttest.Fixtures() {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeBase64(mgmttest.ResToB64(t, res))
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
		{mgmttest.Edge{From: "a"}, `{"From":"a"}`},
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
	raw, _ := base64.StdEncoding.DecodeString(string(mgmttest.ResToB64(t, mgmttest.Fixtures()["test"])))
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
	for _, res := range mgmttest.Fixtures() {
		raw, _ := base64.StdEncoding.DecodeString(string(mgmttest.ResToB64(f, res)))
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

// TestDecodeSplitMessages: encoding/gob ends a message in the middle of a
// list when an element brings a new type (an interface holding a struct):
// the rest of the list is in the next message.
func TestDecodeSplitMessages(t *testing.T) {
	list := []any{mgmttest.Edge{From: "a"}}
	m := map[string]any{}
	for i := range 40 {
		list = append(list, i)
		m[strconv.Itoa(100+i)] = mgmttest.Edge{To: "b"}
	}
	for _, v := range []any{list, m} {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			t.Fatal(err)
		}
		out, err := Decode(b.Bytes())
		if err != nil || !json.Valid(out) {
			t.Fatalf("Decode(gob of %T) = %.80s…, %v", v, out, err)
		}
		var back any
		json.Unmarshal(out, &back)
		switch back := back.(type) {
		case []any:
			if len(back) != 41 {
				t.Errorf("%d elements, want 41", len(back))
			}
		case map[string]any:
			if len(back) != 40 {
				t.Errorf("%d entries, want 40", len(back))
			}
		}
	}
}

// TestDecodeKeys: a key that encodes as a JSON string is used as it is
// (a time.Time key is its GobEncode bytes, in base64), not quoted twice.
func TestDecodeKeys(t *testing.T) {
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(map[time.Time]int{at: 1}); err != nil {
		t.Fatal(err)
	}
	raw, _ := at.GobEncode()
	want := `{"` + base64.StdEncoding.EncodeToString(raw) + `":1}`
	if got, err := Decode(b.Bytes()); err != nil || string(got) != want {
		t.Errorf("Decode = %s, %v; want %s", got, err, want)
	}
}

// TestDecodeMapInKey: a stream whose map keys are maps (which Go cannot
// write) would double the output at every level; it is refused.
func TestDecodeMapInKey(t *testing.T) {
	// Type 64: map[type 64]int, defined by hand.
	def := []byte{0x7f, // -64: a definition of type 64
		0x04,            // wireType field 3: MapT
		0x01,            // mapType field 0: CommonType
		0x01, 0x01, 'm', // Name "m"
		0x01, 0xff, 0x80, 0x00, // Id 64; end of CommonType
		0x01, 0xff, 0x80, // Key: type 64
		0x01, 0x04, 0x00, // Elem: int; end of mapType
		0x00, // end of wireType
	}
	val := []byte{0xff, 0x80, 0x00} // a value of type 64, singleton
	for range 30 {
		val = append(val, 0x01) // one entry, whose key is the next map
	}
	val = append(val, 0x00)
	for range 30 {
		val = append(val, 0x02) // each entry's value: 1
	}
	stream := append([]byte{byte(len(def))}, def...)
	stream = append(append(stream, byte(len(val))), val...)
	if out, err := Decode(stream); err == nil || !strings.Contains(err.Error(), "map inside a map key") {
		t.Fatalf("Decode = %d bytes, %v; want refused", len(out), err)
	}
}
