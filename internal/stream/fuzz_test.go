package stream_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/stream"
)

// FuzzEncodeKey: whatever bytes an etcd key and its values hold, every
// NDJSON line the encoder writes for them (new, updated, deleted) is
// valid JSON whose id, and whose object's key, give back the key's bytes
// (as the string itself, or as {"base64": …} when it is not UTF-8), and
// --value base64 gives back the value's bytes; every -o text line is one
// line with no control character in it.
func FuzzEncodeKey(f *testing.F) {
	for _, s := range [][3]string{
		{"/a", "1", "2"}, {"\xff\xfe", "\x00", "x"}, {"a\nb", "\x1b[31mred", `{"a":1}`},
		{`"quoted"\`, "\u2028", "\xed\xa0\x80"}, {"", "", ""}, {"k\x7f", "\t", `{"base64":"AA=="}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), []byte(s[2]), uint8(0))
	}
	f.Fuzz(func(t *testing.T, key, value, prevValue []byte, m uint8) {
		mode := []etcdkv.ValueMode{etcdkv.ValueAuto, etcdkv.ValueBase64, etcdkv.ValueText, etcdkv.ValueJSON}[int(m)%4]
		obj, err := etcdkv.Object(&mvccpb.KeyValue{Key: key, Value: value, ModRevision: 3}, mode, nil)
		if err != nil {
			return // text or json refused the value: skipped, reported by the source
		}
		prev, err := etcdkv.Object(&mvccpb.KeyValue{Key: key, Value: prevValue, ModRevision: 2}, mode, nil)
		if err != nil {
			prev = obj
		}
		id := string(key)
		events := []flow.Event{
			{Type: flow.New, ID: id, Object: obj, Rev: 3},
			{Type: flow.Updated, ID: id, Object: obj, Prev: prev, Rev: 3},
			{Type: flow.Deleted, ID: id, Prev: obj, Rev: 4},
			{Type: flow.BatchDone, Batch: 1, Synced: true, Rev: 4},
		}

		var out bytes.Buffer
		enc := stream.NewEncoder(&out, stream.Options{})
		for _, ev := range events {
			if err := enc.Encode(ev); err != nil {
				t.Fatal(err)
			}
		}
		lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		if len(lines) != len(events) {
			t.Fatalf("%d lines for %d events:\n%s", len(lines), len(events), out.Bytes())
		}
		for i, l := range lines[:3] {
			var ev struct {
				ID     json.RawMessage
				Object *struct {
					Key   json.RawMessage
					Value json.RawMessage
				}
			}
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatalf("line %d is not JSON: %v: %q", i, err, l)
			}
			if got := keyBytes(t, ev.ID); !bytes.Equal(got, key) {
				t.Fatalf("line %d: id gives %q, want %q: %s", i, got, key, l)
			}
			if ev.Object == nil {
				continue
			}
			if got := keyBytes(t, ev.Object.Key); !bytes.Equal(got, key) {
				t.Fatalf("line %d: object.key gives %q, want %q", i, got, key)
			}
			if mode == etcdkv.ValueBase64 {
				var s string
				json.Unmarshal(ev.Object.Value, &s)
				if got, err := base64.StdEncoding.DecodeString(s); err != nil || !bytes.Equal(got, value) {
					t.Fatalf("line %d: value gives %q, want %q", i, got, value)
				}
			}
		}

		out.Reset()
		enc = stream.NewEncoder(&out, stream.Options{Format: stream.Text, Width: 60})
		for _, ev := range events {
			if err := enc.Encode(ev); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range out.String() {
			if r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
				t.Fatalf("text output holds control character %U:\n%q", r, out.String())
			}
		}
	})
}

// keyBytes returns the bytes an id or key stands for: a string's, or
// {"base64": …}'s decoded.
func keyBytes(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if !utf8.ValidString(s) {
			t.Fatalf("a string id that is not UTF-8: %q", s)
		}
		return []byte(s)
	}
	var b struct{ Base64 string }
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("id %s: %v", raw, err)
	}
	got, err := base64.StdEncoding.DecodeString(b.Base64)
	if err != nil {
		t.Fatalf("id %s: %v", raw, err)
	}
	return got
}
