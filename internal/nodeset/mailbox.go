package nodeset

import (
	"context"
	"sync"
)

// DefaultMaxQueued is how many batches a Mailbox keeps apart before it
// starts merging them.
const DefaultMaxQueued = 64

// Mailbox carries batches from a source to a consumer without ever
// queueing without bound.
//
// A source must keep reading its connection (etcd and gRPC buffer without
// limit inside their clients otherwise), while the consumer may be as slow
// as the pipe behind stdout. The Mailbox sits between them: Put never
// blocks. Up to MaxQueued batches are kept as they came, so batch
// boundaries (one etcd transaction, one Curator event) survive a consumer
// that is merely a little behind. When a change batch arrives at a full
// queue, the queued change batches collapse into one, per id, the latest
// state winning; an unread full listing at the head stays apart, so that
// changes are never mistaken for the initial state (--changes-only). A
// collapsed batch forgets deletions of ids the consumer never saw. So the
// queue holds at most about two changes per id plus MaxQueued batches as
// the source made them: memory is bounded by the number of ids, not by the
// number of updates, however long the consumer lags. What is lost are
// intermediate states nobody had the chance to read, which is what users
// of a slow pipe want. A full listing (initial or resync) supersedes
// everything queued before it.
//
// An Undecodable change never replaces a queued state of its id: that
// state (a good one nobody has read yet, or a deletion) is what the
// consumer should see last.
//
// Put and Close are called by the source (one goroutine or several); Next by
// one consumer. All methods are safe for concurrent use.
type Mailbox struct {
	// MaxQueued bounds the batches kept apart; 0 means DefaultMaxQueued,
	// and values below 2 mean 2. Set it before the first Put.
	MaxQueued int

	ready chan struct{} // capacity 1: "the queue changed"

	mu    sync.Mutex // guards the fields below
	queue []*merged  // only queue[0] can be full (Cause other than CauseChange)
	// seen holds the ids the consumer was last handed as present: a
	// deletion of any other id is news to nobody.
	seen map[string]struct{}
	done bool
	err  error
}

// merged is a queued batch, possibly several merged.
type merged struct {
	changes map[string]Change
	cause   Cause
	synced  bool
	rev     int64
}

func newMerged(cause Cause) *merged {
	return &merged{changes: map[string]Change{}, cause: cause}
}

func (m *merged) full() bool { return m.cause != CauseChange }

// add merges the later batch b into m; see put for forget.
func (m *merged) add(b Batch, forget func(id string) bool) {
	for _, c := range b.Changes {
		m.put(c, forget)
	}
	m.synced = m.synced || b.Synced
	m.rev = max(m.rev, b.Rev)
}

// absorb merges the later batch o into m; see put for forget.
func (m *merged) absorb(o *merged, forget func(id string) bool) {
	for _, c := range o.changes {
		m.put(c, forget)
	}
	m.synced = m.synced || o.synced
	m.rev = max(m.rev, o.rev)
}

// put merges the later change c into m. If forget is set and says that
// the deletion of c.ID is news to nobody, the deletion leaves no trace.
func (m *merged) put(c Change, forget func(id string) bool) {
	if _, ok := m.changes[c.ID]; ok && c.Undecodable {
		return // the queued state is the last one the consumer should see
	}
	if c.Deleted && forget != nil && forget(c.ID) {
		delete(m.changes, c.ID)
		return
	}
	m.changes[c.ID] = c
}

// NewMailbox returns an empty Mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{ready: make(chan struct{}, 1), seen: map[string]struct{}{}}
}

// Put hands b to the consumer. It never blocks. Put after Close is a no-op.
func (m *Mailbox) Put(b Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	limit := m.MaxQueued
	if limit == 0 {
		limit = DefaultMaxQueued
	}
	switch {
	case b.Full():
		m.putFull(b)
	case len(m.queue) >= max(limit, 2):
		m.collapse().add(b, m.forgettable)
	default:
		next := newMerged(b.Cause)
		next.add(b, nil)
		m.queue = append(m.queue, next)
	}
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// putFull replaces the queue with the full listing b.
func (m *Mailbox) putFull(b Batch) {
	next := newMerged(b.Cause)
	if len(m.queue) > 0 && m.queue[0].cause == CauseInitial {
		next.cause = CauseInitial // the consumer has not seen the first listing yet
	}
	next.add(b, nil)
	// An id that is bad in the listing shows the newest queued state of it
	// that nobody has read: a good one is carried over; a deletion leaves
	// it out of the listing, which for a full batch means deleted.
	for _, c := range b.Changes {
		if !c.Undecodable {
			continue
		}
	search:
		for i := len(m.queue) - 1; i >= 0; i-- {
			q, ok := m.queue[i].changes[c.ID]
			switch {
			case !ok || q.Undecodable:
				continue
			case q.Deleted:
				delete(next.changes, c.ID)
			default:
				next.changes[c.ID] = q
			}
			break search
		}
	}
	clear(m.queue)
	m.queue = append(m.queue[:0], next)
}

// collapse merges the queued change batches into the first of them and
// returns it; an unread full listing at the head stays apart.
func (m *Mailbox) collapse() *merged {
	k := 0
	if m.queue[0].full() {
		k = 1
		if len(m.queue) == 1 {
			m.queue = append(m.queue, newMerged(CauseChange))
		}
	}
	into := m.queue[k]
	for i := k + 1; i < len(m.queue); i++ {
		into.absorb(m.queue[i], m.forgettable)
		m.queue[i] = nil
	}
	m.queue = m.queue[:k+1]
	return into
}

// forgettable reports whether a deletion of id is news to nobody: the
// consumer was not last handed id as present, and an unread full listing
// at the head of the queue does not hold it either.
func (m *Mailbox) forgettable(id string) bool {
	if _, ok := m.seen[id]; ok {
		return false
	}
	if len(m.queue) > 0 && m.queue[0].full() {
		if q, ok := m.queue[0].changes[id]; ok && !q.Deleted {
			return false
		}
	}
	return true
}

// Close tells the consumer that no more batches will come. Next returns
// what is queued first, then err (or context.Canceled if err is nil).
func (m *Mailbox) Close(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.done = true
	if err == nil {
		err = context.Canceled
	}
	m.err = err
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// Next blocks until a batch is queued and returns the oldest. It returns
// ctx.Err() when ctx ends, and the error given to Close once the mailbox is
// closed and drained. Changes come in no particular order.
func (m *Mailbox) Next(ctx context.Context) (Batch, error) {
	for {
		m.mu.Lock()
		if len(m.queue) > 0 {
			p := m.queue[0]
			m.queue[0] = nil
			m.queue = m.queue[1:]
			b := Batch{Cause: p.cause, Synced: p.synced, Rev: p.rev, Changes: make([]Change, 0, len(p.changes))}
			if p.full() {
				clear(m.seen)
			}
			for _, c := range p.changes {
				b.Changes = append(b.Changes, c)
				if c.Deleted {
					delete(m.seen, c.ID)
				} else {
					m.seen[c.ID] = struct{}{}
				}
			}
			m.mu.Unlock()
			return b, nil
		}
		done, err := m.done, m.err
		m.mu.Unlock()
		if done {
			return Batch{}, err
		}
		select {
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-m.ready:
		}
	}
}

// Len returns the number of batches queued (for tests and metrics).
func (m *Mailbox) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// Pending returns the number of changes queued, over all batches (for
// tests and metrics).
func (m *Mailbox) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, q := range m.queue {
		n += len(q.changes)
	}
	return n
}
