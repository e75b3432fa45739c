// Package replay is test scaffolding that checks nodewatch's first
// promise: the printed stream, replayed, always equals the source. A
// Checker reads an NDJSON event stream line by line, applies new, updated
// and deleted to a map, and enforces on the way every rule a reader relies
// on; at the end, the map must equal the source's real state. Tests, the
// soak run and the fault suite use it on every stream they read.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Checker replays one event stream. The zero value is ready for a
// stream of `nodes` or `node` (no revisions); set Revs for `key`.
// A Checker is used by one goroutine.
type Checker struct {
	// Revs requires every event and batch_done to carry a rev (`key`),
	// as docs/reference.md defines it: an event's rev is the revision it
	// reflects (a key's mod_revision, a deletion's revision), a
	// batch_done's the revision the batch brings the view to. So batch_done
	// revs never go backwards; every event of a batch is after the previous
	// batch_done's rev (an initial batch has none) and not after its own
	// batch_done's. Within a batch, events come in id order, so their revs
	// may go up and down (a listing, a resync, merged changes).
	Revs bool
	// Again holds the ids delivered again: given to a handler that
	// failed, or in flight when a run with --state was killed, and so
	// delivered again by the retry or the run that resumed, whatever
	// the consumer took. An event of one may start from a state this
	// replay never saw (the failed or killed copy): its type and prev
	// are not checked against the replayed state; it sets the state it
	// says.
	Again map[string]bool

	state   map[string]json.RawMessage // id → object as last printed (compact)
	batch   int                        // the last batch number printed
	synced  bool                       // a batch_done said synced: true
	rev     int64                      // the rev of the last batch_done
	maxRev  int64                      // the highest rev of the events since the last batch_done
	events  int                        // new, updated and deleted lines applied
	pending int                        // events since the last batch_done
}

// event is a line of the stream, as far as replaying goes.
type event struct {
	Type   string          `json:"type"`
	ID     json.RawMessage `json:"id"`
	Object json.RawMessage `json:"object"`
	Prev   json.RawMessage `json:"prev"`
	Rev    *int64          `json:"rev"`
	Batch  *int            `json:"batch"`
	Synced *bool           `json:"synced"`
}

// Line applies one line of the stream and returns the first rule it
// breaks, naming the line; the state is then as far as it got. Lines
// other than events (empty lines) are errors too: the stream is NDJSON.
func (c *Checker) Line(line []byte) error {
	if c.state == nil {
		c.state = map[string]json.RawMessage{}
	}
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		return fmt.Errorf("not a JSON event: %v: %q", err, line)
	}
	if err := c.apply(&ev); err != nil {
		return fmt.Errorf("%w: %s", err, line)
	}
	return nil
}

func (c *Checker) apply(ev *event) error {
	if c.Revs && ev.Type != "" {
		if err := c.checkRev(ev); err != nil {
			return err
		}
	}
	if ev.Type == "batch_done" {
		switch {
		case ev.Batch == nil || ev.Synced == nil:
			return fmt.Errorf("batch_done without batch or synced")
		case *ev.Batch != c.batch+1:
			return fmt.Errorf("batch %d after batch %d", *ev.Batch, c.batch)
		case c.synced && !*ev.Synced:
			return fmt.Errorf("synced went back to false")
		}
		c.batch, c.synced, c.pending = *ev.Batch, *ev.Synced, 0
		return nil
	}
	id, err := key(ev.ID)
	if err != nil {
		return err
	}
	cur, present := c.state[id]
	switch ev.Type {
	case "new", "updated", "deleted":
		if c.Again[id] {
			break
		}
		if err := c.check(ev, id, cur, present); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown type %q", ev.Type)
	}
	c.events++
	c.pending++
	if ev.Type == "deleted" {
		delete(c.state, id)
		return nil
	}
	obj, err := compact(ev.Object)
	if err != nil {
		return fmt.Errorf("%s for %s: object: %v", ev.Type, id, err)
	}
	c.state[id] = obj
	return nil
}

// check checks that ev, of the id whose state is cur (if present),
// follows from it.
func (c *Checker) check(ev *event, id string, cur json.RawMessage, present bool) error {
	switch ev.Type {
	case "new":
		if present {
			return fmt.Errorf("new for %s, which is present", id)
		}
		if len(ev.Prev) > 0 {
			return fmt.Errorf("new for %s with a prev", id)
		}
	case "updated", "deleted":
		if !present {
			return fmt.Errorf("%s for %s, which is absent", ev.Type, id)
		}
		prev, err := compact(ev.Prev)
		if err != nil {
			return fmt.Errorf("%s for %s: prev: %v", ev.Type, id, err)
		}
		if !bytes.Equal(prev, cur) {
			return fmt.Errorf("%s for %s: prev %s is not the state last printed, %s", ev.Type, id, prev, cur)
		}
	}
	return nil
}

// checkRev enforces Revs' rules on ev, and keeps the revs they need.
func (c *Checker) checkRev(ev *event) error {
	if ev.Rev == nil {
		return fmt.Errorf("%s without rev", ev.Type)
	}
	rev := *ev.Rev
	if ev.Type == "batch_done" {
		switch {
		case rev < c.rev:
			return fmt.Errorf("batch rev %d after batch rev %d: went backwards", rev, c.rev)
		case c.maxRev > rev:
			return fmt.Errorf("batch rev %d after an event of the batch at rev %d", rev, c.maxRev)
		}
		c.rev, c.maxRev = rev, 0
		return nil
	}
	if c.batch > 0 && rev <= c.rev {
		return fmt.Errorf("rev %d not after the previous batch's rev %d", rev, c.rev)
	}
	c.maxRev = max(c.maxRev, rev)
	return nil
}

// key returns the map key for an event's id: the id itself for a
// string, its JSON for anything else ({"base64": …}).
func key(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", fmt.Errorf("event without id")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	b, err := compact(raw)
	return string(b), err
}

// compact returns raw in a canonical form: objects with their members
// sorted, no white space, so that two encodings of one value are equal.
func compact(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("missing")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v) // encoding/json sorts map keys
}

// Events returns the number of new, updated and deleted lines applied.
func (c *Checker) Events() int { return c.events }

// Batches returns the last batch number printed.
func (c *Checker) Batches() int { return c.batch }

// Synced reports whether a batch_done said synced: true.
func (c *Checker) Synced() bool { return c.synced }

// Len returns the number of objects in the replayed state.
func (c *Checker) Len() int { return len(c.state) }

// Get returns the replayed object of id, decoded (numbers as
// json.Number), and whether it is present.
func (c *Checker) Get(id string) (any, bool) {
	raw, ok := c.state[id]
	if !ok {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	d.Decode(&v)
	return v, true
}

// Equal compares the replayed state, at the end of a batch, with want
// (the source's real state: objects by id, each as JSON text — a string,
// []byte or json.RawMessage — or as a value encoding/json encodes) and describes every difference; "" when
// they are equal. The stream must end with batch_done: events after the
// last one are a batch cut short.
func (c *Checker) Equal(want map[string]any) string {
	var diffs []string
	if c.pending > 0 {
		diffs = append(diffs, fmt.Sprintf("%d events after the last batch_done", c.pending))
	}
	ids := slices.Sorted(maps.Keys(want))
	for _, id := range ids {
		w, err := canonical(want[id])
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: the source's object: %v", id, err))
			continue
		}
		got, ok := c.state[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %s", id, w))
		case !bytes.Equal(got, w):
			diffs = append(diffs, fmt.Sprintf("%s: %s, want %s", id, got, w))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.state)) {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %s, not in the source", id, c.state[id]))
		}
	}
	return strings.Join(diffs, "\n")
}

// canonical encodes v as compact does: raw JSON is compacted, anything
// else encoded first.
func canonical(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return compact(v)
	case []byte:
		return compact(v)
	case string:
		return compact(json.RawMessage(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return compact(b)
}
