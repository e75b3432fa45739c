package faults

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Recovery is how long one stream took to recover from one fault: from
// the moment of the fault (for a silent connection, the moment it went
// silent) to the first line the stream printed that reflects a write
// etcd acknowledged after the fault.
type Recovery struct {
	Kind Kind
	// Stream is the kind of stream: StreamKey, StreamNodes or
	// StreamEtcdctl.
	Stream string
	// Took is the time to recover; meaningful when Failed is "".
	Took time.Duration
	// Held is how long the fault lasted before it was undone (0 for a
	// fault that is not undone, such as a silent connection).
	Held time.Duration
	// Failed says why the stream did not recover ("" when it did): it
	// printed nothing newer within Config.Converge, or (etcdctl) it ended.
	Failed string
}

// The streams whose recovery is measured.
const (
	// StreamKey is the pinned `key --prefix` (the first line with a rev
	// after the fault's).
	StreamKey = "key"
	// StreamNodes is `nodes` through serve (the marker written to a node
	// record after the fault).
	StreamNodes = "nodes"
	// StreamEtcdctl is `etcdctl watch --prefix` (the first event with a
	// mod_revision after the fault's).
	StreamEtcdctl = "etcdctl"
)

// lineWaits are the waiters for a line that matches; the owner's mutex
// guards them.
type lineWaits []lineWait

type lineWait struct {
	match func([]byte) bool
	at    chan time.Time // buffered; receives once
}

func (w *lineWaits) add(match func([]byte) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	*w = append(*w, lineWait{match, ch})
	return ch
}

// line hands the time of line to every waiter it matches, which are done.
func (w *lineWaits) line(line []byte, at time.Time) {
	*w = slices.DeleteFunc(*w, func(lw lineWait) bool {
		if lw.match(line) {
			lw.at <- at
			return true
		}
		return false
	})
}

// AfterRev matches a nodewatch event (new, updated, deleted) whose rev is
// greater than rev.
func AfterRev(rev int64) func([]byte) bool {
	return func(line []byte) bool {
		var ev struct {
			Type string
			Rev  int64
		}
		if json.Unmarshal(line, &ev) != nil {
			return false
		}
		return ev.Type != "batch_done" && ev.Rev > rev
	}
}

// Marker matches a nodewatch event (new or updated) that holds the
// marker value v.
func Marker(v string) func([]byte) bool {
	quoted := []byte(strconv.Quote(v))
	return func(line []byte) bool {
		return bytes.Contains(line, quoted) &&
			(bytes.HasPrefix(line, []byte(`{"type":"new"`)) || bytes.HasPrefix(line, []byte(`{"type":"updated"`)))
	}
}

// etcdctlAfterRev matches an `etcdctl watch -w json` response holding an
// event whose mod_revision is greater than rev.
func etcdctlAfterRev(rev int64) func([]byte) bool {
	key := []byte(`"mod_revision":`)
	return func(line []byte) bool {
		for {
			i := bytes.Index(line, key)
			if i < 0 {
				return false
			}
			line = line[i+len(key):]
			end := bytes.IndexFunc(line, func(r rune) bool { return r < '0' || r > '9' })
			if end < 0 {
				end = len(line)
			}
			if n, err := strconv.ParseInt(string(line[:end]), 10, 64); err == nil && n > rev {
				return true
			}
		}
	}
}
