package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/nodeset"
)

func TestEncoderLines(t *testing.T) {
	obj := map[string]any{"z": 1, "a": json.Number("12345678901234567890"), "s": "<&>"}
	tests := []struct {
		name string
		ev   nodeset.Event
		opts Options
		want string
	}{{
		name: "new, keys sorted, numbers exact, no HTML escaping",
		ev:   nodeset.Event{Type: nodeset.New, ID: "n1", Object: obj, Rev: 7},
		want: `{"type":"new","id":"n1","object":{"a":12345678901234567890,"s":"<&>","z":1},"rev":7}` + "\n",
	}, {
		name: "updated without rev (Curator)",
		ev:   nodeset.Event{Type: nodeset.Updated, ID: "n1", Object: 2, Prev: 1},
		want: `{"type":"updated","id":"n1","object":2,"prev":1}` + "\n",
	}, {
		name: "deleted with binary id",
		ev:   nodeset.Event{Type: nodeset.Deleted, ID: "\xff", Prev: nil, Rev: 3},
		want: `{"type":"deleted","id":{"base64":"/w=="},"prev":null,"rev":3}` + "\n",
	}, {
		name: "batch_done",
		ev:   nodeset.Event{Type: nodeset.BatchDone, Batch: 2, Synced: true, Cause: nodeset.CauseResync, Counts: nodeset.Counts{New: 1, Deleted: 2}, Rev: 9},
		want: `{"type":"batch_done","batch":2,"synced":true,"cause":"resync","counts":{"new":1,"updated":0,"deleted":2},"rev":9}` + "\n",
	}, {
		name: "timestamps",
		ev:   nodeset.Event{Type: nodeset.New, ID: "a", Object: true},
		opts: Options{Timestamps: true, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)) }},
		want: `{"type":"new","id":"a","object":true,"ts":"2026-01-02T02:04:05Z"}` + "\n",
	}, {
		name: "pretty",
		ev:   nodeset.Event{Type: nodeset.New, ID: "a", Object: map[string]any{"k": 1}},
		opts: Options{Format: Pretty},
		want: "{\n  \"type\": \"new\",\n  \"id\": \"a\",\n  \"object\": {\n    \"k\": 1\n  }\n}\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := NewEncoder(&buf, tt.opts)
			if err := e.Encode(tt.ev); err != nil {
				t.Fatal(err)
			}
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncoderFlushesPerBatch: nothing reaches the writer before the end of
// the batch; everything does after it.
func TestEncoderFlushesPerBatch(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf, Options{})
	e.Encode(nodeset.Event{Type: nodeset.New, ID: "a", Object: 1})
	if buf.Len() != 0 {
		t.Fatalf("written before batch_done: %q", buf.String())
	}
	e.Encode(nodeset.Event{Type: nodeset.BatchDone, Batch: 1})
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 2 {
		t.Fatalf("after batch_done: %d lines written, want 2", n)
	}
}

type failWriter struct{ calls int }

func (w *failWriter) Write([]byte) (int, error) {
	w.calls++
	return 0, errors.New("disk full")
}

// TestEncoderStickyError: the first write error is returned from then on,
// without writing again.
func TestEncoderStickyError(t *testing.T) {
	w := &failWriter{}
	e := NewEncoder(w, Options{FlushEachLine: true})
	ev := nodeset.Event{Type: nodeset.New, ID: "a", Object: 1}
	if err := e.Encode(ev); err == nil {
		t.Fatal("first Encode: no error")
	}
	if err := e.Encode(ev); err == nil || err.Error() != "disk full" {
		t.Fatalf("second Encode: %v", err)
	}
	if w.calls != 1 {
		t.Errorf("writer called %d times, want 1", w.calls)
	}
}

func TestEncoderText(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 1, 2, 14, 3, 7, 0, time.UTC) }
	events := []nodeset.Event{
		{Type: nodeset.New, ID: "/a", Object: map[string]any{"v": 1}},
		{Type: nodeset.Updated, ID: "/a", Object: map[string]any{"v": 2}, Prev: map[string]any{"v": 1}},
		{Type: nodeset.Deleted, ID: "/a", Prev: map[string]any{"v": 2}},
		{Type: nodeset.BatchDone, Batch: 3, Cause: nodeset.CauseChange, Synced: true, Counts: nodeset.Counts{New: 1, Updated: 1, Deleted: 1}, Rev: 8},
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{{
		name: "plain",
		opts: Options{Format: Text, Now: at},
		want: "14:03:07 new      /a  {\"v\":1}\n" +
			"14:03:07 updated  /a  {\"v\":2}\n" +
			"14:03:07 deleted  /a\n" +
			"14:03:07 batch 3 (change): 1 new, 1 updated, 1 deleted; synced, rev 8\n",
	}, {
		name: "colour and summary",
		opts: Options{Format: Text, Now: at, Color: true, Summary: func(obj any) string { return "S" }},
		want: "14:03:07 \x1b[32mnew     \x1b[0m /a  S\n" +
			"14:03:07 \x1b[33mupdated \x1b[0m /a  S\n" +
			"14:03:07 \x1b[31mdeleted \x1b[0m /a\n" +
			"14:03:07 \x1b[2mbatch 3 (change): 1 new, 1 updated, 1 deleted; synced, rev 8\x1b[0m\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := NewEncoder(&buf, tt.opts)
			for _, ev := range events {
				if err := e.Encode(ev); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}
