package gobjson

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/mgmttest"
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
