package etcdkv

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeValueAuto: --value auto never loses information. Text comes
// back as the same bytes, binary as base64 of the same bytes, and JSON only
// ever for valid UTF-8 that parses.
func FuzzDecodeValueAuto(f *testing.F) {
	for _, s := range []string{"", "x", `{"a":1}`, "\xff", `"\xff"`, "1 2", "123456789012345678901234567890", `{"base64":"AA=="}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := valueTree(b, ValueAuto)
		if err != nil {
			t.Fatalf("auto never fails, got %v", err)
		}
		switch x := v.(type) {
		case string:
			if x != string(b) {
				if !json.Valid(b) {
					t.Fatalf("text %q came back as %q", b, x)
				}
			}
		case map[string]any:
			if enc, ok := x["base64"].(string); ok && len(x) == 1 && !utf8.Valid(b) {
				got, err := base64.StdEncoding.DecodeString(enc)
				if err != nil || string(got) != string(b) {
					t.Fatalf("binary %q came back as %q", b, got)
				}
			}
		}
		if !utf8.Valid(b) {
			m, ok := v.(map[string]any)
			if !ok || len(m) != 1 || m["base64"] == nil {
				t.Fatalf("invalid UTF-8 %q decoded as %#v, want {base64}", b, v)
			}
		}
	})
}
