package handoff

import (
	"context"
	"slices"

	"github.com/nodewatch/nodewatch/internal/flow"
)

var _ flow.Sink = (*Queue)(nil)

// Put hands b to the reader. It never blocks. Put after Close is a no-op.
func (q *Queue) Put(b flow.Batch) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	switch {
	case b.Full():
		q.putFull(b)
	case len(q.changes) < q.maxQueued:
		p := &pending{cause: b.Cause}
		distinct := q.distinct(b.Changes)
		if distinct {
			p.list = q.spare(len(b.Changes)) // add copies b's changes into it
		}
		p.add(b, nil, distinct)
		q.changes = append(q.changes, p)
	default:
		into := q.changes[0]
		into.toMap()
		merged := 0
		for _, p := range q.changes[1:] {
			merged += into.merge(p, q.forgettable)
		}
		clear(q.changes[1:])
		q.changes = q.changes[:1]
		merged += into.add(b, q.forgettable, false)
		if merged > 0 && q.OnMerge != nil {
			q.OnMerge(merged)
		}
	}
	q.signal()
}

func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// putFull replaces everything queued with the full batch b.
func (q *Queue) putFull(b flow.Batch) {
	next := &pending{changes: make(map[string]flow.Change, len(b.Changes)), cause: b.Cause}
	if q.full != nil && q.full.cause == flow.CauseInitial {
		next.cause = flow.CauseInitial // the reader has not had the first listing
	}
	next.add(b, nil, false)
	if slices.ContainsFunc(b.Changes, func(c flow.Change) bool { return c.Undecodable }) {
		// lastQueued looks the bad records up in every queued batch:
		// by id, not through lists of any length.
		for _, p := range q.changes {
			p.toMap()
		}
	}
	for id, c := range next.changes {
		if c.Deleted {
			delete(next.changes, id) // absence says it in a full batch
			continue
		}
		if !c.Undecodable {
			continue
		}
		switch last, ok := q.lastQueued(id); {
		case !ok:
			// Nothing unread: the reader has the last good state.
		case last.Deleted:
			delete(next.changes, id)
		default:
			next.changes[id] = last
		}
	}
	q.full = next
	clear(q.changes)
	q.changes = q.changes[:0]
}

// lastQueued returns the newest state of id that is queued and not
// Undecodable (a deletion included), and whether there is one.
func (q *Queue) lastQueued(id string) (flow.Change, bool) {
	for i := len(q.changes) - 1; i >= 0; i-- {
		if c, ok := q.changes[i].get(id); ok && !c.Undecodable {
			return c, true
		}
	}
	if q.full == nil {
		return flow.Change{}, false
	}
	c, ok := q.full.changes[id]
	switch {
	case !ok:
		return flow.Change{ID: id, Deleted: true}, true // absent from a full listing
	case c.Undecodable:
		return flow.Change{}, false
	}
	return c, true
}

// forgettable reports whether a deletion of id, merged into the oldest
// queued change batch, is news to nobody: the reader will not have id when
// it gets that batch.
func (q *Queue) forgettable(id string) bool {
	if q.full != nil {
		c, ok := q.full.changes[id]
		if !ok {
			return true
		}
		if !c.Undecodable {
			return false
		}
	}
	return !q.has(id)
}

// Close tells the reader that no more batches will come: Next returns what
// is queued first, then err (context.Canceled if err is nil). Close after
// Close is a no-op.
func (q *Queue) Close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	if err == nil {
		err = context.Canceled
	}
	q.err = err
	q.signal()
}
