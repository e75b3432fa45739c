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
// that is merely a little behind. When a batch arrives at a full queue,
// everything queued collapses into one batch, per id, the latest state
// winning. So the queue never holds more than one change per id plus
// MaxQueued batches as the source made them: memory is bounded by the
// number of ids, not by the number of updates, however long the consumer
// lags. What is lost are intermediate states nobody had the chance to
// read, which is what users of a slow pipe want. A full listing (initial
// or resync) supersedes everything queued before it.
//
// Put and Close are called by the source (one goroutine or several); Next by
// one consumer. All methods are safe for concurrent use.
type Mailbox struct {
	// MaxQueued bounds the batches kept apart; 0 means DefaultMaxQueued.
	// Set it before the first Put.
	MaxQueued int

	ready chan struct{} // capacity 1: "the queue changed"

	mu    sync.Mutex // guards the fields below
	queue []*merged
	done  bool
	err   error
}

// merged is a queued batch, possibly several merged.
type merged struct {
	changes map[string]Change
	cause   Cause
	synced  bool
	rev     int64
}

func newMerged(b Batch) *merged {
	return &merged{changes: make(map[string]Change, len(b.Changes)), cause: b.Cause}
}

func (m *merged) add(b Batch) {
	for _, c := range b.Changes {
		m.put(c)
	}
	m.synced = m.synced || b.Synced
	m.rev = max(m.rev, b.Rev)
}

// absorb merges the later batch o into m.
func (m *merged) absorb(o *merged) {
	for _, c := range o.changes {
		m.put(c)
	}
	m.synced = m.synced || o.synced
	m.rev = max(m.rev, o.rev)
}

func (m *merged) put(c Change) {
	if prev, ok := m.changes[c.ID]; ok && c.Undecodable && !prev.Deleted {
		// The record turned bad after a state nobody has read yet: that
		// state is the last good one, keep it.
		return
	}
	m.changes[c.ID] = c
}

// NewMailbox returns an empty Mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{ready: make(chan struct{}, 1)}
}

// Put hands b to the consumer. It never blocks. Put after Close is a no-op.
func (m *Mailbox) Put(b Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	limit := m.MaxQueued
	if limit <= 0 {
		limit = DefaultMaxQueued
	}
	switch {
	case b.Full():
		// A full listing replaces whatever is queued. If the consumer has
		// not seen the initial listing yet, this still is it.
		next := newMerged(b)
		if len(m.queue) > 0 && m.queue[0].cause == CauseInitial {
			next.cause = CauseInitial
		}
		// A record that is bad in the listing keeps the newest good state
		// still queued for it, which nobody has read yet.
		for _, c := range b.Changes {
			if !c.Undecodable {
				continue
			}
			for i := len(m.queue) - 1; i >= 0; i-- {
				if q, ok := m.queue[i].changes[c.ID]; ok && !q.Undecodable && !q.Deleted {
					next.changes[c.ID] = q
					break
				}
			}
		}
		m.queue = append(m.queue[:0], next)
		next.add(b)
	case len(m.queue) >= limit:
		// The consumer is far behind: collapse the queue into its first
		// batch (which keeps its cause: an unread initial listing stays
		// initial), then add b.
		first := m.queue[0]
		for i, q := range m.queue[1:] {
			first.absorb(q)
			m.queue[i+1] = nil
		}
		m.queue = m.queue[:1]
		first.add(b)
	default:
		next := newMerged(b)
		next.add(b)
		m.queue = append(m.queue, next)
	}
	select {
	case m.ready <- struct{}{}:
	default:
	}
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
		var p *merged
		if len(m.queue) > 0 {
			p = m.queue[0]
			m.queue[0] = nil
			m.queue = m.queue[1:]
		}
		done, err := m.done, m.err
		m.mu.Unlock()
		if p != nil {
			b := Batch{Cause: p.cause, Synced: p.synced, Rev: p.rev, Changes: make([]Change, 0, len(p.changes))}
			for _, c := range p.changes {
				b.Changes = append(b.Changes, c)
			}
			return b, nil
		}
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
