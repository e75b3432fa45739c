package jsondoc

import (
	"bytes"
	"testing"
)

// Free gives back only what its maker gave, and overwrites it at once;
// BlankFor makes the next Doc from it.
func TestFree(t *testing.T) {
	kept := New([]byte(`{"a":1}`))
	Free(kept)
	if string(kept.JSON()) != `{"a":1}` {
		t.Fatalf("a Doc its maker did not give was freed: %q", kept.JSON())
	}
	d, _, b := BlankFor(64)
	b = append(b, `{"b":2}`...)
	d.Indexed(b, "b", 5, 6, nil).Give()
	json := d.JSON()
	Free(d)
	if !bytes.Equal(json, []byte("#######")) {
		t.Fatalf("a freed Doc's encoding reads %q, not what no JSON starts with", json)
	}
	if _, ok := d.Member("b"); ok || len(d.JSON()) != 0 {
		t.Fatalf("a freed Doc still knows its member, or its encoding: %q", d.JSON())
	}
	Free(New(nil).Give()) // nothing to keep: no panic
	big := New(make([]byte, maxFree+1)).Give()
	Free(big)
	if len(big.JSON()) != maxFree+1 {
		t.Fatal("a Doc larger than maxFree was freed")
	}
}
