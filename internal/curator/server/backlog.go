package server

import (
	"sync"
	"weak"

	"github.com/nodewatch/nodewatch/internal/view"
)

// backlog is the start of every nodes_in_cluster stream that subscribes
// while the nodes are in one state: the events of its backlog, made once
// and sent to each of them, and the ids of its nodes, from which each of
// their queues starts (handoff.NewFrom). Nothing in it changes once made;
// the server makes a new one once the nodes have changed.
type backlog struct {
	ids   []string    // in order
	nodes []fieldNode // nodes[i] is ids[i]'s

	mu sync.Mutex // guards events
	// events are made by the first stream that sends them and shared by
	// those that send them at the same time; once none of them holds
	// them any more, the garbage collector may take them (and the next
	// stream makes them again), so that an idle server does not keep a
	// second copy of its nodes.
	events weak.Pointer[backlogEvents]
}

// backlogEvents are the events of a backlog, and how many nodes each
// holds.
type backlogEvents struct {
	events []*sharedEvent
	nodes  []int
}

// newBacklog returns the backlog of the nodes in set (*record objects).
func newBacklog(set *view.Set) *backlog {
	bl := &backlog{ids: make([]string, 0, set.Len()), nodes: make([]fieldNode, 0, set.Len())}
	set.Ascend(func(id string, obj any) bool {
		bl.ids = append(bl.ids, id)
		bl.nodes = append(bl.nodes, obj.(*record).field)
		return true
	})
	return bl
}

// encoded returns bl's events, made if nobody holds them: its nodes in
// events of at most limit bytes, the last one (possibly holding no nodes)
// marked PROGRESS_LAST_BACKLOGGED. The caller must not modify them. Safe
// for concurrent use.
func (bl *backlog) encoded(limit int) *backlogEvents {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if evs := bl.events.Value(); evs != nil {
		return evs
	}
	evs := backlogEventsOf(bl.nodes, limit)
	bl.events = weak.Make(evs)
	return evs
}

// progressLast is the progress field of the last event of a backlog:
// field 2 (progress), varint, PROGRESS_LAST_BACKLOGGED (1).
const progressLast = "\x10\x01"

// backlogEventsOf returns nodes in events of at most limit bytes, the
// last one (possibly holding no nodes) marked PROGRESS_LAST_BACKLOGGED.
func backlogEventsOf(nodes []fieldNode, limit int) *backlogEvents {
	// Every event reserves room for the progress field, so that the
	// last one fits too.
	marker := len(progressLast)
	rest := 0 // what the nodes not yet in an event weigh
	for _, n := range nodes {
		rest += len(n)
	}
	// Each event gets a buffer of the size it will have, so that a
	// backlog costs its own size once, not again in growing buffers.
	evs := &backlogEvents{}
	var raw []byte
	inRaw := 0
	for _, n := range nodes {
		if len(raw) > 0 && marker+len(raw)+len(n) > limit {
			evs.events = append(evs.events, share(raw))
			evs.nodes = append(evs.nodes, inRaw)
			raw, inRaw = nil, 0
		}
		if raw == nil {
			raw = make([]byte, 0, min(rest+marker, limit))
		}
		raw = append(raw, n...)
		inRaw++
		rest -= len(n)
	}
	evs.events = append(evs.events, share(append(raw, progressLast...)))
	evs.nodes = append(evs.nodes, inRaw)
	return evs
}
