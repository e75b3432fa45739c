package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

func TestEncoderLines(t *testing.T) {
	obj := map[string]any{"z": 1, "a": json.Number("12345678901234567890"), "s": "<&>"}
	tests := []struct {
		name string
		ev   flow.Event
		opts Options
		want string
	}{{
		name: "new, keys sorted, numbers exact, no HTML escaping",
		ev:   flow.Event{Type: flow.New, ID: "n1", Object: obj, Rev: 7},
		want: `{"type":"new","id":"n1","object":{"a":12345678901234567890,"s":"<&>","z":1},"rev":7}` + "\n",
	}, {
		name: "updated without rev (Curator)",
		ev:   flow.Event{Type: flow.Updated, ID: "n1", Object: 2, Prev: 1},
		want: `{"type":"updated","id":"n1","changed":[[]],"object":2,"prev":1}` + "\n",
	}, {
		name: "updated: changed paths in jq's order, keys escaped",
		ev: flow.Event{Type: flow.Updated, ID: "n1",
			Prev:   jsondoc.New([]byte(`{"s":{"b":1,"a\"":[1,2]},"gone":true}`)),
			Object: jsondoc.New([]byte(`{"s":{"a\"":[1,3],"b":1},"new":null}`))},
		want: `{"type":"updated","id":"n1","changed":[["gone"],["new"],["s","a\"",1]],"object":{"s":{"a\"":[1,3],"b":1},"new":null},"prev":{"s":{"b":1,"a\"":[1,2]},"gone":true}}` + "\n",
	}, {
		name: "deleted with binary id",
		ev:   flow.Event{Type: flow.Deleted, ID: "\xff", Prev: nil, Rev: 3},
		want: `{"type":"deleted","id":{"base64":"/w=="},"prev":null,"rev":3}` + "\n",
	}, {
		name: "batch_done",
		ev:   flow.Event{Type: flow.BatchDone, Batch: 2, Synced: true, Cause: flow.CauseResync, Counts: flow.Counts{New: 1, Deleted: 2}, Rev: 9},
		want: `{"type":"batch_done","batch":2,"synced":true,"cause":"resync","counts":{"new":1,"updated":0,"deleted":2},"rev":9}` + "\n",
	}, {
		name: "timestamps",
		ev:   flow.Event{Type: flow.New, ID: "a", Object: true},
		opts: Options{Timestamps: true, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)) }},
		want: `{"type":"new","id":"a","object":true,"ts":"2026-01-02T02:04:05Z"}` + "\n",
	}, {
		name: "pretty",
		ev:   flow.Event{Type: flow.New, ID: "a", Object: map[string]any{"k": 1}},
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
	e.Encode(flow.Event{Type: flow.New, ID: "a", Object: 1})
	if buf.Len() != 0 {
		t.Fatalf("written before batch_done: %q", buf.String())
	}
	e.Encode(flow.Event{Type: flow.BatchDone, Batch: 1})
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 2 {
		t.Fatalf("after batch_done: %d lines written, want 2", n)
	}
}

// TestEncoderHoldBatches: with HoldBatches, a batch's end leaves its
// lines for Flush, in JSON and in text, unless bufSize bytes are held.
func TestEncoderHoldBatches(t *testing.T) {
	for _, format := range []Format{JSON, Text} {
		var buf bytes.Buffer
		e := NewEncoder(&buf, Options{Format: format, HoldBatches: true})
		for batch := 1; batch <= 2; batch++ {
			e.Encode(flow.Event{Type: flow.New, ID: "a", Object: batch})
			e.Encode(flow.Event{Type: flow.BatchDone, Batch: batch, Counts: flow.Counts{New: 1}})
		}
		if buf.Len() != 0 || e.Buffered() == 0 {
			t.Fatalf("%v: %d bytes written and %d held after two batches, want none written", format, buf.Len(), e.Buffered())
		}
		held := e.Buffered()
		if err := e.Flush(); err != nil || buf.Len() != held || e.Buffered() != 0 {
			t.Fatalf("%v: Flush wrote %d of %d bytes (%v)", format, buf.Len(), held, err)
		}
		// Held lines are written once bufSize bytes are held.
		buf.Reset()
		large := strings.Repeat("x", 1<<10)
		for batch := 3; buf.Len() == 0; batch++ {
			e.Encode(flow.Event{Type: flow.New, ID: "a", Object: large})
			e.Encode(flow.Event{Type: flow.BatchDone, Batch: batch, Counts: flow.Counts{New: 1}})
		}
		if buf.Len() < bufSize || buf.Len() > bufSize+4<<10 {
			t.Fatalf("%v: %d bytes written at once, want about %d", format, buf.Len(), bufSize)
		}
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
	ev := flow.Event{Type: flow.New, ID: "a", Object: 1}
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
	events := []flow.Event{
		{Type: flow.New, ID: "/a", Object: map[string]any{"v": 1}},
		{Type: flow.Updated, ID: "/a", Object: map[string]any{"v": 2}, Prev: map[string]any{"v": 1}},
		{Type: flow.Deleted, ID: "/a", Prev: map[string]any{"v": 2}},
		{Type: flow.BatchDone, Batch: 3, Cause: flow.CauseChange, Synced: true, Counts: flow.Counts{New: 1, Updated: 1, Deleted: 1}, Rev: 8},
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
			"           .v: 1 → 2\n" +
			"14:03:07 deleted  /a\n" +
			"14:03:07 batch 3 (change): 1 new, 1 updated, 1 deleted; synced, rev 8\n",
	}, {
		name: "colour and summary",
		opts: Options{Format: Text, Now: at, Color: true, Summary: func(obj any) string { return "S" }},
		want: "14:03:07 \x1b[32mnew     \x1b[0m /a  S\n" +
			"14:03:07 \x1b[33mupdated \x1b[0m /a  S\n" +
			"           .v: \x1b[31m1\x1b[0m → \x1b[32m2\x1b[0m\n" +
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

// TestEncoderTextBatchLines: -o text prints a batch line only where it
// says more than the batch's event lines: not after a single change.
func TestEncoderTextBatchLines(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 1, 2, 14, 3, 7, 0, time.UTC) }
	one := flow.Counts{Updated: 1}
	for _, c := range []struct {
		name  string
		batch flow.Event
		shown bool
	}{
		{"one change", flow.Event{Cause: flow.CauseChange, Synced: true, Counts: one}, false},
		{"two changes", flow.Event{Cause: flow.CauseChange, Synced: true, Counts: flow.Counts{New: 1, Deleted: 1}}, true},
		{"no change printed", flow.Event{Cause: flow.CauseChange, Synced: true}, true},
		{"the initial state, one object", flow.Event{Cause: flow.CauseInitial, Synced: true, Counts: flow.Counts{New: 1}}, true},
		{"a resync of one change", flow.Event{Cause: flow.CauseResync, Synced: true, Counts: one}, true},
	} {
		var buf bytes.Buffer
		e := NewEncoder(&buf, Options{Format: Text, Now: at})
		c.batch.Type, c.batch.Batch = flow.BatchDone, 2
		if err := e.Encode(c.batch); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "batch 2"); got != c.shown {
			t.Errorf("%s: batch line shown %v, want %v: %q", c.name, got, c.shown, buf.String())
		}
	}
}

// TestEncoderTextBatchGap: a batch of one change gets its batch line
// when -o text was quiet for TextGap before it (a heartbeat line counts
// as a line), not when it was not.
func TestEncoderTextBatchGap(t *testing.T) {
	now := time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	e := NewEncoder(&buf, Options{Format: Text, Now: func() time.Time { return now }})
	change := func(batch int, after time.Duration) bool {
		now = now.Add(after)
		buf.Reset()
		obj := map[string]any{"v": batch}
		for _, ev := range []flow.Event{
			{Type: flow.New, ID: "/a", Object: obj},
			{Type: flow.BatchDone, Batch: batch, Cause: flow.CauseChange, Synced: true, Counts: flow.Counts{New: 1}},
		} {
			if err := e.Encode(ev); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Contains(buf.String(), fmt.Sprintf("batch %d ", batch))
	}
	for _, c := range []struct {
		after time.Duration
		shown bool
	}{{0, false}, {TextGap - time.Second, false}, {TextGap, true}, {time.Second, false}, {3 * TextGap, true}} {
		if got := change(int(now.Unix()%1000), c.after); got != c.shown {
			t.Errorf("a change %v after the last line: batch line shown %v, want %v", c.after, got, c.shown)
		}
	}
	now = now.Add(2 * TextGap)
	e.Encode(flow.Event{Type: flow.Heartbeat, Confirmed: "connection"})
	if change(7, time.Second) {
		t.Errorf("a change a second after a heartbeat line: batch line shown")
	}
}

// TestEncoderTextChanges: an update in -o text shows each changed path as
// "path: old → new" under ChangeRoot, values shortened to the width.
func TestEncoderTextChanges(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 1, 2, 14, 3, 7, 0, time.UTC) }
	long := `"` + strings.Repeat("x", 80) + `"`
	many, manyPrev := "{", "{"
	for i := range 12 {
		many += fmt.Sprintf(`"k%02d":%d,`, i, i)
		manyPrev += fmt.Sprintf(`"k%02d":%d,`, i, -i-1)
	}
	many, manyPrev = many+`"z":0}`, manyPrev+`"z":0}`
	tests := []struct {
		name      string
		root      jsondoc.Path
		prev, obj string
		want      string
	}{{
		name: "nested, added, removed, odd keys",
		prev: `{"a":{"b c":1},"if":2,"gone":"x"}`,
		obj:  `{"a":{"b c":2},"if":3,"added":[1]}`,
		want: "           .a[\"b c\"]: 1 → 2\n" +
			"           .added: (absent) → [1]\n" +
			"           .gone: \"x\" → (absent)\n" +
			"           .[\"if\"]: 2 → 3\n",
	}, {
		name: "arrays: an element, or the list when its length changes",
		prev: `{"r":[{"n":1},{"n":2}],"l":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28]}`,
		obj:  `{"r":[{"n":1},{"n":5}],"l":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29]}`,
		want: "           .l: [28 items] → [29 items]\n" +
			"           .r[1].n: 2 → 5\n",
	}, {
		name: "a key's JSON value: paths relative to it",
		root: jsondoc.Path{"value"},
		prev: `{"mod_revision":4,"value":{"replicas":2,"image":"a"},"version":1}`,
		obj:  `{"mod_revision":5,"value":{"replicas":3,"image":"a"},"version":2}`,
		want: "           .replicas: 2 → 3\n",
	}, {
		name: "a key's text value: old → new, long strings cut",
		root: jsondoc.Path{"value"},
		prev: `{"mod_revision":4,"value":"hello","version":1}`,
		obj:  `{"mod_revision":5,"value":` + long + `,"version":2}`,
		want: "           \"hello\" → \"" + strings.Repeat("x", 40) + "…\"\n",
	}, {
		name: "a key re-put with the same value",
		root: jsondoc.Path{"value"},
		prev: `{"mod_revision":4,"value":1,"version":1}`,
		obj:  `{"mod_revision":5,"value":1,"version":2}`,
		want: "           (.value unchanged)\n",
	}, {
		name: "binary values",
		root: jsondoc.Path{"value"},
		prev: `{"value":{"base64":"/wA="}}`,
		obj:  `{"value":{"base64":"/wE="}}`,
		want: "           .base64: \"/wA=\" → \"/wE=\"\n",
	}, {
		name: "control characters in keys and values do not reach the terminal",
		prev: "{\"k\u009b\":\"a\"}",
		obj:  "{\"k\u009b\":\"\u009b2J\u007f\"}",
		want: "           .[\"k\ufffd\"]: \"a\" → \"\ufffd2J\ufffd\"\n",
	}, {
		name: "many changes summed up",
		prev: manyPrev,
		obj:  many,
		want: func() string {
			var s string
			for i := range 10 {
				s += fmt.Sprintf("           .k%02d: %d → %d\n", i, -i-1, i)
			}
			return s + "           … and 2 more\n"
		}(),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := NewEncoder(&buf, Options{Format: Text, Now: at, ChangeRoot: tt.root, Width: 100, Summary: func(any) string { return "S" }})
			ev := flow.Event{Type: flow.Updated, ID: "/x\x1b[2J", Prev: jsondoc.New([]byte(tt.prev)), Object: jsondoc.New([]byte(tt.obj))}
			if err := e.Encode(ev); err != nil {
				t.Fatal(err)
			}
			e.Flush()
			want := "14:03:07 updated  /x\ufffd[2J  S\n" + tt.want
			if diff := cmp.Diff(want, buf.String()); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatPath(t *testing.T) {
	for _, c := range []struct {
		p    jsondoc.Path
		want string
	}{
		{nil, "."},
		{jsondoc.Path{"a", "b_2"}, ".a.b_2"},
		{jsondoc.Path{0, "a"}, ".[0].a"},
		{jsondoc.Path{"roles", 3}, ".roles[3]"},
		{jsondoc.Path{"x.y", "2a", "and", "é"}, `.["x.y"]["2a"]["and"]["é"]`},
		{jsondoc.Path{""}, `.[""]`},
	} {
		if got := FormatPath(c.p); got != c.want {
			t.Errorf("FormatPath(%#v) = %s, want %s", c.p, got, c.want)
		}
	}
}

// TestEncoderTextCutsSummary: on a terminal (Width set) a line fits the
// width, colour codes taking no room; without a width it stays whole.
func TestEncoderTextCutsSummary(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 1, 2, 14, 3, 7, 0, time.UTC) }
	ev := flow.Event{Type: flow.New, ID: "/k", Object: jsondoc.New([]byte(`{"v":"` + strings.Repeat("é", 50) + `"}`))}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Format: Text, Now: at, Width: 40}, "14:03:07 new      /k  {\"v\":\"" + strings.Repeat("é", 11) + "…\n"},
		{Options{Format: Text, Now: at, Width: 40, Color: true}, "14:03:07 \x1b[32mnew     \x1b[0m /k  {\"v\":\"" + strings.Repeat("é", 11) + "…\n"},
		{Options{Format: Text, Now: at}, "14:03:07 new      /k  {\"v\":\"" + strings.Repeat("é", 50) + "\"}\n"},
	} {
		var buf bytes.Buffer
		e := NewEncoder(&buf, c.opts)
		e.Encode(ev)
		e.Flush()
		if buf.String() != c.want {
			t.Errorf("width %d, colour %v:\n got %q\nwant %q", c.opts.Width, c.opts.Color, buf.String(), c.want)
		}
	}
}

// TestEncoderTextControls: in -o text, the C1 controls in an object
// (which JSON leaves as they are) are shown as U+FFFD, in that
// object's line only: the lines of the batch before it, still in the
// encoder's buffer, stay as they were.
func TestEncoderTextControls(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 1, 2, 14, 3, 7, 0, time.UTC) }
	var buf bytes.Buffer
	e := NewEncoder(&buf, Options{Format: Text, Now: at})
	for _, ev := range []flow.Event{
		{Type: flow.New, ID: "/a", Object: "é\t"},
		{Type: flow.New, ID: "/b", Object: "x\u009b2Jy\x7fé"},
		{Type: flow.BatchDone, Batch: 1, Cause: flow.CauseChange, Counts: flow.Counts{New: 2}},
	} {
		if err := e.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := "14:03:07 new      /a  \"é\\t\"\n" +
		"14:03:07 new      /b  \"x\uFFFD2Jy\\u007fé\"\n" + // DEL escaped already
		"14:03:07 batch 1 (change): 2 new, 0 updated, 0 deleted\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
