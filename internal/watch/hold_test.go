package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Holding: the lines of several batches written out at once while more are queued.

// putAll puts its batches at once, then closes queued and waits for the
// end of the run.
type putAll struct {
	batches []flow.Batch
	queued  chan struct{}
}

func (s *putAll) Run(ctx context.Context, out flow.Sink) error {
	for _, b := range s.batches {
		out.Put(b)
	}
	close(s.queued)
	<-ctx.Done()
	return ctx.Err()
}

// writes records each write to it; the first waits for first.
type writes struct {
	first chan struct{}
	mu    sync.Mutex
	each  []string
}

func (w *writes) Write(p []byte) (int, error) {
	if w.mu.Lock(); len(w.each) == 0 {
		w.mu.Unlock()
		<-w.first
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	w.each = append(w.each, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.each)
}

// TestHoldsQueuedBatches: while batches are queued, the loop writes out
// several at once, each whole; once none is queued, it writes out all it
// printed before it waits.
func TestHoldsQueuedBatches(t *testing.T) {
	defer func(d time.Duration) { holdFor = d }(holdFor)
	holdFor = time.Hour // what is written at once depends on the queue alone
	const n = 40        // change batches, fewer than the queue merges
	src := &putAll{batches: []flow.Batch{initial()}, queued: make(chan struct{})}
	for i := range n {
		src.batches = append(src.batches, change(put(fmt.Sprintf("k%02d", i), i)))
	}
	// The first write (the initial batch) waits until every change is
	// queued, so that the loop is n batches behind.
	w := &writes{first: src.queued}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, src, w, Options{})
	}()
	testkit.Eventually(t, func() error {
		if got := strings.Count(strings.Join(w.all(), ""), "batch_done"); got != n+1 {
			return fmt.Errorf("%d batches written of %d", got, n+1)
		}
		return nil
	})
	got := w.all()
	if len(got) > 2 {
		t.Errorf("%d writes for %d batches queued at once, want at most 2 (the initial batch, then the rest)", len(got), n)
	}
	want := []string{"done 1 initial"}
	for i := range n {
		want = append(want, fmt.Sprintf("new k%02d", i), fmt.Sprintf("done %d change", i+2))
	}
	if diff := cmp.Diff(want, short(strings.Join(got, ""))); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	for i, s := range got {
		if lines := short(s); !strings.HasPrefix(lines[len(lines)-1], "done ") {
			t.Errorf("write %d ends in the middle of a batch: %q", i, s)
		}
	}
	cancel()
	<-done
}

// TestHeldBatchesOutliveAFailure: a run that fails on a batch (a --strict
// error) writes out the whole batches it held before it, and nothing of
// the batch that failed.
func TestHeldBatchesOutliveAFailure(t *testing.T) {
	defer func(d time.Duration) { holdFor = d }(holdFor)
	holdFor = time.Hour
	good := func(id string) flow.Change {
		return flow.Change{ID: id, Object: map[string]any{"v": map[string]any{"x": true}}}
	}
	src := &putAll{batches: []flow.Batch{initial()}, queued: make(chan struct{})}
	for i := range 5 {
		src.batches = append(src.batches, change(good(fmt.Sprintf("k%d", i))))
	}
	// The last batch prints k5 before its k6 fails the filter.
	src.batches = append(src.batches, change(good("k5"), flow.Change{ID: "k6", Object: obj(1)}))
	w := &writes{first: src.queued}
	_, err := runFor(t, context.Background(), src, w, Options{Filter: compile(t, "--filter", ".v.x"), Strict: true})
	if err == nil {
		t.Fatal("the run did not fail")
	}
	want := []string{"done 1 initial"}
	for i := range 5 {
		want = append(want, fmt.Sprintf("new k%d", i), fmt.Sprintf("done %d change", i+2))
	}
	if diff := cmp.Diff(want, short(strings.Join(w.all(), ""))); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
