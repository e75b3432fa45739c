package handoff

import (
	"github.com/nodewatch/nodewatch/internal/flow"
)

// pending is a queued batch, possibly several merged.
type pending struct {
	// list is the changes of one change batch as it came (a copy), when
	// it holds each id once: most batches are read before another merges
	// into them, and a list costs less than a map to make, to hand over
	// and to collect (serve puts every change into every stream's queue;
	// one etcd transaction is one batch). Otherwise, and once merged
	// into, changes holds them, and list is nil. Next hands the list
	// itself to the reader.
	list    []flow.Change
	one     [1]flow.Change // list's array when it holds one change
	changes map[string]flow.Change
	cause   flow.Cause
	synced  bool
	rev     int64
	// confirmed: a batch merged into it was Confirmed; the merged batch
	// reflects a state at least as recent.
	confirmed bool
}

// add merges the later batch b into p, and returns the number of
// changes queued in p that its changes replaced; see put for forget. If
// p is empty and b's ids are distinct, p keeps b's changes as a list:
// a copy, made in p.list's array if Put gave it a spare (empty, with room).
func (p *pending) add(b flow.Batch, forget func(id string) bool, distinct bool) (merged int) {
	switch {
	case p.changes != nil || len(p.list) > 0 || forget != nil || !distinct:
		p.toMap()
		for _, c := range b.Changes {
			merged += p.put(c, forget)
		}
	case len(b.Changes) == 1:
		p.one[0] = b.Changes[0]
		p.list = p.one[:]
	default:
		p.list = append(p.list, b.Changes...)
	}
	p.synced = p.synced || b.Synced
	p.rev = max(p.rev, b.Rev)
	p.confirmed = p.confirmed || b.Confirmed
	return merged
}

// toMap moves p's list into its map.
func (p *pending) toMap() {
	if p.changes != nil {
		return
	}
	p.changes = make(map[string]flow.Change, len(p.list))
	for _, c := range p.list {
		p.changes[c.ID] = c
	}
	p.list, p.one = nil, [1]flow.Change{}
}

// len returns the number of changes p holds.
func (p *pending) len() int {
	if p.changes != nil {
		return len(p.changes)
	}
	return len(p.list)
}

// each calls fn with every change p holds, one per id.
func (p *pending) each(fn func(flow.Change)) {
	if p.changes != nil {
		for _, c := range p.changes {
			fn(c)
		}
		return
	}
	for _, c := range p.list {
		fn(c)
	}
}

// get returns p's change of id, and whether it holds one.
func (p *pending) get(id string) (flow.Change, bool) {
	if p.changes != nil {
		c, ok := p.changes[id]
		return c, ok
	}
	for _, c := range p.list {
		if c.ID == id {
			return c, true
		}
	}
	return flow.Change{}, false
}

// merge merges the later queued batch o into p, and returns the number
// of changes queued in p that o's changes replaced; see put for forget.
func (p *pending) merge(o *pending, forget func(id string) bool) (merged int) {
	p.toMap()
	o.each(func(c flow.Change) { merged += p.put(c, forget) })
	p.synced = p.synced || o.synced
	p.rev = max(p.rev, o.rev)
	p.confirmed = p.confirmed || o.confirmed
	return merged
}

// put merges the later change c into p, and returns 1 if it replaced (or,
// as a forgotten deletion, removed) a change queued for c.ID, else 0. If
// forget is set and says that a deletion of c.ID is news to nobody, the
// deletion leaves no trace.
func (p *pending) put(c flow.Change, forget func(id string) bool) int {
	_, queued := p.changes[c.ID]
	if queued && c.Undecodable {
		return 0 // the queued state is the last good one
	}
	if c.Deleted && forget != nil && forget(c.ID) {
		delete(p.changes, c.ID)
	} else {
		p.changes[c.ID] = c
	}
	if queued {
		return 1
	}
	return 0
}
