package stream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/enum"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Format is an output format (-o).
type Format int

const (
	// JSON is one compact JSON object per line (NDJSON).
	JSON Format = iota
	// Pretty is indented JSON, one object after the other.
	Pretty
	// Text is one human line per event: time, type, id and a summary.
	Text
	// Table is a row per object, in Columns: drawn in place on a
	// terminal (Screen), one row per change appended elsewhere.
	Table
)

// formatNames are the names of the formats, as -o takes them.
var formatNames = enum.Names[Format]{"json", "pretty", "text", "table"}

// Formats returns the names of the formats, as -o takes them.
func Formats() []string { return formatNames.All() }

// ParseFormat parses the value of -o: json (or ""), pretty, text or table.
func ParseFormat(s string) (Format, error) { return formatNames.Parse("output format", s, true) }

// Options configure an Encoder.
type Options struct {
	Format Format
	// Timestamps adds "ts" (RFC 3339, UTC) to every line.
	Timestamps bool
	// Now returns the time for "ts"; nil means time.Now.
	Now func() time.Time
	// FlushEachLine flushes after every line instead of every batch
	// (stdout is a terminal).
	FlushEachLine bool
	// HoldBatches leaves the lines of a batch that ended in the Encoder
	// (unless it holds bufSize bytes), for the caller to Flush them when
	// it has no batch ready to print after it.
	HoldBatches bool
	// Color marks event types with ANSI colours (Text only).
	Color bool
	// Summary returns the part of an object that a Text line shows; nil
	// shows the whole object as compact JSON.
	Summary func(obj any) string
	// ChangeRoot is the part of an object whose changes a Text update
	// shows, one line each, with paths relative to it (for a key: its
	// value). Nil shows every change.
	ChangeRoot jsondoc.Path
	// Width is how wide a Text change line may be; 0 means 100. A Table
	// on a Screen fits it (0 means 80); elsewhere a Table's rows stay
	// whole.
	Width int
	// Columns are the columns of a Table.
	Columns []Column
	// Screen draws a Table in place, on the alternate screen of the
	// terminal that the Encoder writes to, Height lines high (0: as many
	// as it has rows), until Close; its writes are then its own, from a
	// goroutine of its own as well, and what Flush and Buffered see is
	// empty.
	Screen bool
	Height int
}

// Encoder writes events to an io.Writer. It is not safe for concurrent
// use. The first write error is sticky: every later call returns it.
type Encoder struct {
	w    io.Writer
	opts Options
	// buf holds the lines not yet written to w, the one being made at
	// its end: a line is made where it is written from, not copied
	// there (at 4 KiB an update's line is 8 KiB, object and prev).
	buf    bytes.Buffer
	indent bytes.Buffer // -o pretty: the line indented
	diff   jsondoc.Differ
	err    error

	// -o text: when the last line was written; whether the batch being
	// written came after a gap (TextGap) and so has its batch line.
	lastText     time.Time
	inBatch, gap bool

	// -o table: its rows appended to buf (tab), or its screen (scr).
	tab *table
	scr *screen
}

// TextGap is how long -o text must have been quiet before a batch for
// that batch to get its batch line, whatever it holds: a marker, with
// its number (and etcd revision), for a person who comes back to a
// terminal.
const TextGap = time.Minute

// bufSize is how many bytes of lines an Encoder holds before it writes
// them out, if no batch ends first.
const bufSize = 64 << 10

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer, opts Options) *Encoder {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Encoder{w: w, opts: opts}
	e.buf.Grow(bufSize)
	switch {
	case opts.Format == Table && opts.Screen:
		e.scr = newScreen(w, opts)
	case opts.Format == Table:
		e.tab = newTable(opts.Columns, opts.Now)
	}
	return e
}

// Encode writes ev as one line. A BatchDone event also flushes, unless
// HoldBatches.
func (e *Encoder) Encode(ev flow.Event) error {
	if e.err != nil {
		return e.err
	}
	switch {
	case e.scr != nil:
		return e.scr.encode(ev)
	case e.tab != nil:
		if e.tab.appended(&e.buf, ev) {
			return e.ended()
		}
		return nil
	}
	b := &e.buf
	start := b.Len()
	if e.opts.Format == Text {
		now := e.opts.Now()
		switch {
		case ev.Type == flow.BatchDone:
			gap := e.gap
			e.inBatch, e.gap = false, false
			if !telling(ev) && !gap {
				return e.ended() // the batch's one line said it all
			}
		case ev.Type == flow.Heartbeat:
		case !e.inBatch:
			e.inBatch = true
			e.gap = !e.lastText.IsZero() && now.Sub(e.lastText) >= TextGap
		}
		e.lastText = now
		e.text(b, ev, now)
		return e.write(ev)
	}
	b.WriteString(`{"type":"`)
	b.WriteString(ev.Type.String())
	b.WriteByte('"')
	switch ev.Type {
	case flow.Heartbeat:
		b.WriteString(`,"confirmed":"`)
		b.WriteString(ev.Confirmed)
		b.WriteByte('"')
	case flow.BatchDone:
		b.WriteString(`,"batch":`)
		writeInt(b, int64(ev.Batch))
		b.WriteString(`,"synced":`)
		b.WriteString(strconv.FormatBool(ev.Synced))
		b.WriteString(`,"cause":"`)
		b.WriteString(ev.Cause.String())
		b.WriteString(`","counts":{"new":`)
		writeInt(b, int64(ev.Counts.New))
		b.WriteString(`,"updated":`)
		writeInt(b, int64(ev.Counts.Updated))
		b.WriteString(`,"deleted":`)
		writeInt(b, int64(ev.Counts.Deleted))
		b.WriteByte('}')
	default:
		b.WriteString(`,"id":`)
		writeID(b, ev.ID)
		if ev.Type == flow.Updated {
			b.WriteString(`,"changed":`)
			writePaths(b, e.changed(ev))
		}
		if ev.Type != flow.Deleted {
			b.WriteString(`,"object":`)
			writeValue(b, ev.Object)
		}
		if ev.Type != flow.New {
			b.WriteString(`,"prev":`)
			writeValue(b, ev.Prev)
		}
	}
	if ev.Rev != 0 {
		b.WriteString(`,"rev":`)
		writeInt(b, ev.Rev)
	}
	if e.opts.Timestamps {
		b.WriteString(`,"ts":"`)
		b.WriteString(e.opts.Now().UTC().Format(time.RFC3339Nano))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	if e.opts.Format == Pretty {
		e.indent.Reset()
		json.Indent(&e.indent, b.Bytes()[start:], "", "  ") // valid JSON by construction
		b.Truncate(start)
		b.Write(e.indent.Bytes())
	}
	return e.write(ev)
}

// writeInt writes v in decimal, without allocating.
func writeInt(b *bytes.Buffer, v int64) {
	b.Write(strconv.AppendInt(b.AvailableBuffer(), v, 10))
}

// write ends the line ev's at the end of buf, and writes out what buf
// holds when the batch ends or buf is full.
func (e *Encoder) write(ev flow.Event) error {
	e.buf.WriteByte('\n')
	switch {
	case ev.Type == flow.BatchDone:
		return e.ended()
	case ev.Type == flow.Heartbeat || e.opts.FlushEachLine || e.buf.Len() >= bufSize:
		return e.Flush()
	}
	return nil
}

// ended writes out what buf holds at the end of a batch, unless
// HoldBatches leaves that to the caller.
func (e *Encoder) ended() error {
	if e.opts.HoldBatches && e.buf.Len() < bufSize {
		return nil
	}
	return e.Flush()
}

// Truncate drops the lines not written out yet but their first n bytes,
// for a run that ends with a batch it did not finish (-o table: and the
// rows of that batch).
func (e *Encoder) Truncate(n int) {
	e.buf.Truncate(n)
	if e.tab != nil {
		e.tab.pending = e.tab.pending[:0]
	}
}

// Buffered returns how many bytes of lines are not written out yet.
func (e *Encoder) Buffered() int { return e.buf.Len() }

// Flush writes out buffered lines (-o table: the rows of the batch so
// far too).
func (e *Encoder) Flush() error {
	if e.tab != nil && e.err == nil && len(e.tab.pending) > 0 {
		e.tab.flush(&e.buf)
	}
	if e.err != nil || e.buf.Len() == 0 {
		return e.err
	}
	if _, err := e.w.Write(e.buf.Bytes()); err != nil {
		e.err = err
	}
	e.buf.Reset()
	return e.err
}

// Close ends the output: a Table on a Screen stops drawing and gives the
// terminal back as it was (with final, the run met its goal, printing
// the table there once as it last was); other output has nothing to end.
// The caller calls it once, after the last Encode and Flush, from the
// goroutine that called them. It returns the first write error.
func (e *Encoder) Close(final bool) error {
	if e.scr != nil {
		return e.scr.close(final)
	}
	return e.err
}

// ANSI colours for Text.
const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[31m"
	ansiDim    = "\x1b[2m"
)

// text formats ev as a human line, e.g.
//
//	14:03:07 new      /nodes/a  {"state":"UP"}
//	14:03:07 batch 2 (change): 1 new, 0 updated, 0 deleted; synced, rev 8
func (e *Encoder) text(b *bytes.Buffer, ev flow.Event, now time.Time) {
	b.WriteString(now.Format("15:04:05"))
	b.WriteByte(' ')
	if ev.Type == flow.Heartbeat {
		e.color(b, ansiDim)
		if ev.Rev != 0 {
			fmt.Fprintf(b, "heartbeat: %s confirmed current at rev %d", ev.Confirmed, ev.Rev)
		} else {
			fmt.Fprintf(b, "heartbeat: %s confirmed alive", ev.Confirmed)
		}
		e.color(b, ansiReset)
		return
	}
	if ev.Type == flow.BatchDone {
		e.color(b, ansiDim)
		fmt.Fprintf(b, "batch %d (%s): %d new, %d updated, %d deleted", ev.Batch, ev.Cause, ev.Counts.New, ev.Counts.Updated, ev.Counts.Deleted)
		if ev.Synced {
			b.WriteString("; synced")
		}
		if ev.Rev != 0 {
			fmt.Fprintf(b, ", rev %d", ev.Rev)
		}
		e.color(b, ansiReset)
		return
	}
	c := map[flow.EventType]string{flow.New: ansiGreen, flow.Updated: ansiYellow, flow.Deleted: ansiRed}[ev.Type]
	e.color(b, c)
	fmt.Fprintf(b, "%-8s", ev.Type)
	e.color(b, ansiReset)
	b.WriteByte(' ')
	if id, ok := ID(ev.ID).(string); ok {
		b.WriteString(sanitize(id))
	} else {
		writeValue(b, ID(ev.ID))
	}
	if ev.Type == flow.Deleted {
		return
	}
	b.WriteString("  ")
	start := b.Len()
	if e.opts.Summary != nil {
		b.WriteString(sanitize(e.opts.Summary(ev.Object)))
	} else {
		writeValue(b, ev.Object)
		// JSON leaves DEL and the C1 controls (U+0080–U+009F) as they
		// are; a terminal may obey them.
		if v := b.Bytes()[start:]; bytes.ContainsFunc(v, isControl) {
			s := string(v) // before Truncate lets the buffer be written over
			b.Truncate(start)
			b.WriteString(sanitize(s))
		}
	}
	// On a terminal the line fits its width (the whole object is in -o
	// json); elsewhere it stays whole, for grep.
	if e.opts.Width > 0 {
		cutLine(b, start, e.opts.Width)
	}
	if ev.Type == flow.Updated {
		e.textChanges(b, ev)
	}
}

// telling reports whether the batch line of ev tells a person something
// its event lines did not (-o text): a batch of one change says nothing
// more; the initial state, a resync, several events at once, or a batch
// that printed none (an --until or --heartbeat that needed it) do. (So
// does one after a quiet TextGap: see Encode.)
func telling(ev flow.Event) bool {
	return ev.Cause != flow.CauseChange || ev.Counts.New+ev.Counts.Updated+ev.Counts.Deleted != 1
}

func (e *Encoder) color(b *bytes.Buffer, code string) {
	if e.opts.Color {
		b.WriteString(code)
	}
}

// changed returns the paths at which an update's object differs from
// its prev (valid until the next call).
func (e *Encoder) changed(ev flow.Event) []jsondoc.Path {
	return e.diff.Diff(asDoc(ev.Prev), asDoc(ev.Object))
}

// asDoc returns v as a Doc: itself if it is one, else its encoding.
func asDoc(v any) *jsondoc.Doc {
	if d, ok := v.(*jsondoc.Doc); ok {
		return d
	}
	out, _ := gojq.Marshal(v) // never fails for the types gojq accepts
	return jsondoc.New(out)
}

// writePaths writes paths as JSON: an array of jq paths.
func writePaths(b *bytes.Buffer, paths []jsondoc.Path) {
	b.WriteByte('[')
	for i, p := range paths {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j, step := range p {
			if j > 0 {
				b.WriteByte(',')
			}
			switch s := step.(type) {
			case int:
				b.WriteString(strconv.Itoa(s))
			case string:
				writeString(b, s)
			}
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
}

// writeString writes s as a JSON string, as writeValue would.
func writeString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			writeValue(b, s) // escapes, or UTF-8 to check
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// ID returns how an id is printed: the string itself when it is valid
// UTF-8, else {"base64": "..."}, so that binary etcd keys are not mangled.
func ID(id string) any {
	if utf8.ValidString(id) {
		return id
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte(id))}
}

// writeValue writes v: a *jsondoc.Doc as its JSON, anything else the way jq
// would (keys sorted, numbers exact).
func writeValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *jsondoc.Doc:
		b.Write(v.JSON())
		return
	case string:
		b.Write(jsondoc.AppendString(b.AvailableBuffer(), v))
		return
	}
	out, _ := gojq.Marshal(v) // never fails for the types gojq accepts
	b.Write(out)
}

// writeID writes ID(id) without making it a value first.
func writeID(b *bytes.Buffer, id string) {
	if utf8.ValidString(id) {
		b.Write(jsondoc.AppendString(b.AvailableBuffer(), id))
		return
	}
	writeValue(b, ID(id))
}

// IsClosedPipe reports whether err comes from writing to a pipe whose
// reader went away (`| head -1`): for a stream, the end of its purpose,
// not a failure.
func IsClosedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrClosedPipe)
}
