package nodeset

import (
	"context"
	"sync"
)

// Mailbox carries batches from a source to a consumer without ever
// queueing without bound.
//
// A source must keep reading its connection (etcd and gRPC buffer without
// limit inside their clients otherwise), while the consumer may be as slow
// as the pipe behind stdout. The Mailbox sits between them: Put never
// blocks, and batches not yet taken by Next are merged per id, the latest
// state winning. Memory is therefore bounded by the number of ids, not by
// the number of updates. What is lost are intermediate states that nobody
// had the chance to read, which is what users of a slow pipe want.
//
// Put and Close are called by the source (one goroutine or several); Next by
// one consumer. All methods are safe for concurrent use.
type Mailbox struct {
	ready chan struct{} // capacity 1: "pending changed"

	mu      sync.Mutex // guards the fields below
	pending *merged
	done    bool
	err     error
}

// merged is a batch under construction.
type merged struct {
	changes map[string]Change
	cause   Cause
	synced  bool
	rev     int64
}

// NewMailbox returns an empty Mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{ready: make(chan struct{}, 1)}
}

// Put hands b to the consumer, merging it with what is still pending. It
// never blocks. Put after Close is a no-op.
func (m *Mailbox) Put(b Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	p := m.pending
	switch {
	case p == nil:
		p = &merged{changes: make(map[string]Change, len(b.Changes)), cause: b.Cause}
		m.pending = p
	case b.Full():
		// A full listing replaces whatever was pending. If the consumer
		// has not seen the initial listing yet, this still is it.
		if p.cause != CauseInitial {
			p.cause = b.Cause
		}
		clear(p.changes)
	}
	for _, c := range b.Changes {
		p.changes[c.ID] = c
	}
	p.synced = p.synced || b.Synced
	p.rev = max(p.rev, b.Rev)
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// Close tells the consumer that no more batches will come. Next returns
// what is pending first, then err (or context.Canceled if err is nil).
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

// Next blocks until a batch is pending and returns it, merged. It returns
// ctx.Err() when ctx ends, and the error given to Close once the mailbox is
// closed and drained. Changes come in no particular order.
func (m *Mailbox) Next(ctx context.Context) (Batch, error) {
	for {
		m.mu.Lock()
		p, done, err := m.pending, m.done, m.err
		m.pending = nil
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
