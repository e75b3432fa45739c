package client

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// backlogConverter turns a backlog's events into changes, GOMAXPROCS at a
// time; an event converted establishes the stream (est).
type backlogConverter struct {
	r       *clientRun
	est     *atomic.Bool
	sem     chan struct{}
	wg      sync.WaitGroup
	results []*[]flow.Change      // by event, in the order received
	nodes   atomic.Int64          // converted so far
	err     atomic.Pointer[error] // the first event that failed to convert
}

func newBacklogConverter(r *clientRun, est *atomic.Bool) *backlogConverter {
	return &backlogConverter{r: r, est: est, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// add converts ev in the background.
func (b *backlogConverter) add(ev *wireEvent) {
	slot := new([]flow.Change)
	b.results = append(b.results, slot)
	b.sem <- struct{}{}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.sem }()
		changes, err := b.r.changes(ev, "")
		if err != nil {
			b.err.CompareAndSwap(nil, &err)
			return
		}
		*slot = changes // read after wg.Wait
		b.r.establish(b.est)
		n := int(b.nodes.Add(int64(len(changes))))
		if b.r.c.Listed != nil {
			b.r.c.Listed(n)
		}
	}()
}

// failed returns the error of an event that failed to convert so far, if
// one did.
func (b *backlogConverter) failed() error {
	if err := b.err.Load(); err != nil {
		return *err
	}
	return nil
}

// wait returns the latest change of each id, once every event is
// converted, or the error of an event that failed to convert.
func (b *backlogConverter) wait() (map[string]flow.Change, error) {
	b.wg.Wait()
	if err := b.failed(); err != nil {
		return nil, err
	}
	latest := map[string]flow.Change{}
	for _, changes := range b.results {
		for _, c := range *changes {
			latest[c.ID] = c
		}
	}
	return latest, nil
}
