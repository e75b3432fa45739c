package stream

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/nodewatch/nodewatch/internal/nodeset"
)

// Format is an output format (-o).
type Format int

const (
	// JSON is one compact JSON object per line (NDJSON).
	JSON Format = iota
	// Pretty is indented JSON, one object after the other.
	Pretty
)

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
}

// Encoder writes events to an io.Writer. It is not safe for concurrent
// use. The first write error is sticky: every later call returns it.
type Encoder struct {
	w    *bufio.Writer
	opts Options
	line bytes.Buffer
	err  error
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer, opts Options) *Encoder {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Encoder{w: bufio.NewWriterSize(w, 64<<10), opts: opts}
}

// Encode writes ev as one line. A BatchDone event also flushes.
func (e *Encoder) Encode(ev nodeset.Event) error {
	if e.err != nil {
		return e.err
	}
	b := &e.line
	b.Reset()
	b.WriteString(`{"type":"`)
	b.WriteString(ev.Type.String())
	b.WriteByte('"')
	switch ev.Type {
	case nodeset.BatchDone:
		b.WriteString(`,"batch":`)
		b.WriteString(strconv.Itoa(ev.Batch))
		b.WriteString(`,"synced":`)
		b.WriteString(strconv.FormatBool(ev.Synced))
		b.WriteString(`,"cause":"`)
		b.WriteString(ev.Cause.String())
		b.WriteString(`","counts":{"new":`)
		b.WriteString(strconv.Itoa(ev.Counts.New))
		b.WriteString(`,"updated":`)
		b.WriteString(strconv.Itoa(ev.Counts.Updated))
		b.WriteString(`,"deleted":`)
		b.WriteString(strconv.Itoa(ev.Counts.Deleted))
		b.WriteByte('}')
	default:
		b.WriteString(`,"id":`)
		writeValue(b, ID(ev.ID))
		if ev.Type != nodeset.Deleted {
			b.WriteString(`,"object":`)
			writeValue(b, ev.Object)
		}
		if ev.Type != nodeset.New {
			b.WriteString(`,"prev":`)
			writeValue(b, ev.Prev)
		}
	}
	if ev.Rev != 0 {
		b.WriteString(`,"rev":`)
		b.WriteString(strconv.FormatInt(ev.Rev, 10))
	}
	if e.opts.Timestamps {
		b.WriteString(`,"ts":"`)
		b.WriteString(e.opts.Now().UTC().Format(time.RFC3339Nano))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	out := b.Bytes()
	if e.opts.Format == Pretty {
		var ind bytes.Buffer
		json.Indent(&ind, out, "", "  ") // out is valid JSON by construction
		out = ind.Bytes()
	}
	if _, err := e.w.Write(out); err != nil {
		e.err = err
		return err
	}
	if err := e.w.WriteByte('\n'); err != nil {
		e.err = err
		return err
	}
	if ev.Type == nodeset.BatchDone || e.opts.FlushEachLine {
		return e.Flush()
	}
	return nil
}

// Flush writes out buffered lines.
func (e *Encoder) Flush() error {
	if e.err != nil {
		return e.err
	}
	if err := e.w.Flush(); err != nil {
		e.err = err
	}
	return e.err
}

// ID returns how an id is printed: the string itself when it is valid
// UTF-8, else {"base64": "..."}, so that binary etcd keys are not mangled.
func ID(id string) any {
	if utf8.ValidString(id) {
		return id
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte(id))}
}

// writeValue writes v the way jq would: keys sorted, numbers exact.
func writeValue(b *bytes.Buffer, v any) {
	out, _ := gojq.Marshal(v) // never fails for the types gojq accepts
	b.Write(out)
}
