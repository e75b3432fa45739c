package nodeset

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
	// batch, its new state is one that the reader's filter turns down
	// (Judge): either way it is not in the reader's view.
	Deleted bool
	// Kept: the reader's filter keeps Object, as the source learnt when it
	// asked (Judge); the follower does not ask again.
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
// keep b.Changes once it returns (it may keep the Changes in it): the etcd
// watcher makes every change batch in the same slice.
// handoff.Queue is the Sink between every source and its reader.
type Sink interface {
	Put(Batch)
}

// A Judge is what a Sink may also be: the reader's filter, for a source to
// ask about the new state of each change as it makes it. A view holds only
// objects its filter keeps, so a change whose object the filter turns down
// leaves the view as a deletion does, and the source may hand it on as
// one, letting go of the object while it is fresh in the cache instead of
// carrying it to the reader to be turned down there; if it handed on the
// id's last change as such a deletion too, it may leave the change out
// (the reader does not have the id).
type Judge interface {
	// Keeps reports whether the reader's filter keeps obj (keep), when
	// it can tell without an error, and fast (decided); the reader
	// judges the rest itself.
	Keeps(obj any) (keep, decided bool)
}

// ReportListed tells s, if it wants to know (the progress meter of a
// terminal does), that the full listing a source is reading has n objects
// so far. Sources call it while they list; the listing ends with the Put
// of its full batch.
func ReportListed(s Sink, n int) {
	if l, ok := s.(interface{ Listed(n int) }); ok {
		l.Listed(n)
	}
}
