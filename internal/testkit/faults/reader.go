//go:build linux

package faults

import "sync"

// State is what the reader of a stream (Stream, CuratorClient) knows of
// it at one moment.
type State struct {
	// Synced: the stream printed (handed over) its initial state.
	Synced bool
	// Events is the number of events applied.
	Events int
	// Resyncs is the number of batches printed with cause "resync" (a
	// Stream's only).
	Resyncs int
	// Violation is the first rule the stream broke, or nil.
	Violation error
	// Ended: the process ended other than by Close (a Stream's only).
	Ended bool
}

// gate lets the reader of a stream stop reading for a while, as a reader
// that falls behind does. Its methods are safe across goroutines.
type gate struct {
	mu     sync.Mutex    // guards paused
	paused chan struct{} // non-nil while the reader does not read; closed to resume
}

// PauseReading makes the reader stop reading (after what it is at);
// ResumeReading makes it go on.
func (g *gate) PauseReading() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = make(chan struct{})
	}
}

// ResumeReading undoes PauseReading.
func (g *gate) ResumeReading() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

// pass waits while the reader is paused, or until done is closed (nil:
// never); it reports whether the reader may read on.
func (g *gate) pass(done <-chan struct{}) bool {
	g.mu.Lock()
	paused := g.paused
	g.mu.Unlock()
	if paused == nil {
		return true
	}
	select {
	case <-paused:
		return true
	case <-done:
		return false
	}
}
