// Package flow is the contract of what flows through a run of nodewatch:
// a source (the etcd watcher, the Curator client) hands Batches of Changes
// to a Sink; the hand-off (package handoff) queues them for a reader; the
// view (package view) turns them into the Events that are printed, handed
// to a --exec handler, or sent to a serve stream. Every package on the
// way speaks these types and nothing else, and this page is the one place
// that says who owns what.
//
// # Ownership
//
// Objects (Change.Object, Event.Object, Event.Prev) are *jsondoc.Doc for
// every source that prints; the rules below are about them and about the
// slices that carry them.
//
//  1. A Batch's Changes slice belongs to its maker until Put returns. A
//     Sink keeps the Changes in it (copied into a slice of its own), never
//     b.Changes itself: the etcd watcher makes every change batch in one
//     reused slice.
//  2. An Object a source hands on is given, or shared, never lent: the
//     source either keeps no reference to it (jsondoc.Doc.Give) or counts
//     its own hold (jsondoc.Doc.Share, the etcd watcher's last object of a
//     large value, which it decodes the next one from). A source that
//     does neither hands on objects that are never freed: correct, only
//     slower.
//  3. The view holds one reference to each object it shows. With
//     view.Follower.Recycle, it frees (jsondoc.Free) the objects it takes
//     out of the view or keeps out of it once the batch is applied: the
//     ones it replaced, deleted, or found equal or of no interest. Only a
//     reader whose emit keeps nothing of an Event past its call may turn
//     Recycle on (the NDJSON encoder: it writes the line and lets go).
//  4. A reader that applied a change batch may give its slice back to
//     the hand-off (handoff.Queue.Recycle), which may copy a later batch
//     into it; the reader does not touch it, nor anything sharing its
//     array, afterwards.
//  5. A freed Doc's memory may become another Doc at once. Builds with the
//     race detector or the nodewatch_poison tag overwrite it on Free, so
//     that a read after Free shows in tests as what no JSON is.
//  6. With NODEWATCH_FAST=off (package fast), nothing is freed or reused:
//     every Doc and slice is left to the garbage collector, and rules 3–5
//     hold trivially. That is the reference the pooled path is held to.
//
// # Capabilities
//
// What a reader offers a source (its filter, to ask early about each
// object; a callback for how far a listing got) is handed to the source
// when it is built, as values (Hooks: etcdkv.Watcher's Keeps and Listed,
// client.Client's Listed), never discovered on the Sink.
package flow

import "github.com/nodewatch/nodewatch/internal/enum"

// Cause says why a batch exists.
type Cause int

const (
	// CauseChange is a batch of live changes.
	CauseChange Cause = iota
	// CauseInitial is the first full listing of the source.
	CauseInitial
	// CauseResync is a full listing after a reconnect or a compaction.
	CauseResync
	// CauseResume is the first full listing of a run that resumed a
	// view recorded by an earlier one (--state): what differs from it.
	CauseResume
)

// String returns the name printed in batch_done's cause field.
func (c Cause) String() string {
	switch c {
	case CauseInitial:
		return "initial"
	case CauseResync:
		return "resync"
	case CauseResume:
		return "resume"
	default:
		return "change"
	}
}

// Change is the latest state of one id as a source saw it.
type Change struct {
	ID     string
	Object any // the new state; nil when Deleted
	// Deleted: the id no longer exists at the source, or, in a change
	// batch, its new state is one that the reader's filter turns down (a
	// source given the filter asked it early): either way it is not in
	// the reader's view.
	Deleted bool
	// Kept: the reader's filter keeps Object, as the source learnt when it
	// asked (Keeps); the follower does not ask again.
	Kept bool
	// Undecodable: the id exists at the source but its state cannot be
	// read (a bad record). The follower keeps what it printed for it, and
	// a full batch holding it does not count the id as gone.
	Undecodable bool
	Rev         int64
}

// Batch is what a source hands to the follower: changes that belong
// together (one etcd transaction, one Curator event, one full listing).
//
// A batch whose Cause is CauseInitial or CauseResync is full: Changes hold
// the complete state of the source, and every id missing from them is gone.
// A CauseChange batch holds only the ids that changed.
type Batch struct {
	Changes []Change
	Cause   Cause
	// Synced reports that the source has delivered its initial state.
	Synced bool
	// Rev is the etcd revision the batch reflects; 0 where the source has
	// none (Curator).
	Rev int64
	// Confirmed: the source has just heard from its server that it is
	// current. For etcd, everything up to Rev was delivered (a progress
	// response, or events); for the Curator, whose wire has no progress,
	// that the connection is alive. A confirmation alone is a change
	// batch with no changes: it prints nothing, but --heartbeat reports
	// it.
	Confirmed bool
}

// Full reports whether b holds the complete state of the source.
func (b Batch) Full() bool { return b.Cause != CauseChange }

// Sink receives the batches of a source, in the order the source made
// them. Put must not block for long: a source keeps reading its
// connection while the reader of the batches may be slow. Put must not
// keep b.Changes once it returns (rule 1 of the package doc).
// handoff.Queue is the Sink between every source and its reader.
type Sink interface {
	Put(Batch)
}

// Hooks are what a reader offers the source it reads, handed to the
// source when it is built (rule: capabilities are values, never found on
// the Sink). Nil fields offer nothing.
type Hooks struct {
	// Keeps is the reader's filter where it can answer fast and without
	// an error: whether it keeps obj (keep), when it could tell (decided).
	// A source may ask it about each object as it makes it, hand a change
	// whose object it turns down on as a deletion, and mark one it keeps
	// as Change.Kept. It must be safe to call from the source's goroutine.
	Keeps func(obj any) (keep, decided bool)
	// Listed is told how many objects the full listing a source is
	// reading has so far; the listing ends with the Put of its full batch.
	// It must be safe to call from any goroutine and must not block.
	Listed func(n int)
}

// EventType is the kind of an Event.
type EventType int

// The event types. Heartbeat: nothing was printed for a while, and the
// source has just confirmed that it is current (--heartbeat); the
// Follower never emits it, the run that prints does.
const (
	New       EventType = iota + 1 // an object of interest appeared
	Updated                        // an object of interest changed (by Equals)
	Deleted                        // an object went away or stopped matching Filter
	BatchDone                      // the end of a batch
	Heartbeat                      // the source confirmed it is current (see above)
)

// eventTypeNames are the names printed in the events' type field.
var eventTypeNames = enum.Names[EventType]{"", "new", "updated", "deleted", "batch_done", "heartbeat"}

// String returns the name printed in the event's type field.
func (t EventType) String() string { return eventTypeNames.String(t) }

// Counts counts the events of a batch by type.
type Counts struct {
	New, Updated, Deleted int
}

// Event is one line of nodewatch's output.
type Event struct {
	Type   EventType
	ID     string // New, Updated, Deleted
	Object any    // New, Updated: the state now
	Prev   any    // Updated, Deleted: the state printed before
	Rev    int64  // the etcd revision reflected; 0 when unknown

	// Heartbeat only: what the source confirmed, "watch" (etcd: every
	// change up to Rev was delivered) or "connection" (the Curator wire
	// has no progress: only that the server answers).
	Confirmed string

	// BatchDone only.
	Batch  int
	Synced bool
	Cause  Cause
	Counts Counts
}
