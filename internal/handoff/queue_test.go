package handoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"

	"github.com/google/go-cmp/cmp"
)

func sorted(b flow.Batch) flow.Batch {
	sort.Slice(b.Changes, func(i, j int) bool { return b.Changes[i].ID < b.Changes[j].ID })
	return b
}

// drain returns every queued batch, changes sorted by id.
func drain(t *testing.T, m *Queue) []flow.Batch {
	t.Helper()
	var out []flow.Batch
	for queuedBatches(m) > 0 {
		b, err := m.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sorted(b))
	}
	return out
}

// TestQueueMerges: what comes out of a queue with MaxQueued 2 that
// nobody read while the batches went in.
func TestQueueMerges(t *testing.T) {
	chg := func(rev int64, c ...flow.Change) flow.Batch {
		return flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: rev, Changes: c}
	}
	tests := []struct {
		name string
		puts []flow.Batch
		want []flow.Batch
	}{{
		name: "below the limit, batches stay apart",
		puts: []flow.Batch{chg(5, flow.Change{ID: "a", Object: 1}), chg(6, flow.Change{ID: "a", Object: 2})},
		want: []flow.Batch{chg(5, flow.Change{ID: "a", Object: 1}), chg(6, flow.Change{ID: "a", Object: 2})},
	}, {
		name: "at the limit, change batches collapse per id, latest wins",
		puts: []flow.Batch{chg(5, flow.Change{ID: "a", Object: 1}), chg(6, flow.Change{ID: "a", Object: 2}, flow.Change{ID: "b", Object: 1}), chg(7, flow.Change{ID: "a", Object: 3})},
		want: []flow.Batch{chg(7, flow.Change{ID: "a", Object: 3}, flow.Change{ID: "b", Object: 1})},
	}, {
		name: "a full listing replaces queued changes",
		puts: []flow.Batch{chg(5, flow.Change{ID: "a", Object: 1}), {Cause: flow.CauseResync, Synced: true, Rev: 9, Changes: []flow.Change{{ID: "b", Object: 1}}}},
		want: []flow.Batch{{Cause: flow.CauseResync, Synced: true, Rev: 9, Changes: []flow.Change{{ID: "b", Object: 1}}}},
	}, {
		name: "an unread initial listing stays initial, and apart from later changes",
		puts: []flow.Batch{
			{Cause: flow.CauseInitial, Synced: true, Rev: 3, Changes: []flow.Change{{ID: "a", Object: 1}}},
			{Cause: flow.CauseResync, Synced: true, Rev: 4, Changes: []flow.Change{{ID: "a", Object: 2}}},
			chg(5, flow.Change{ID: "c", Object: 1}),
			chg(6, flow.Change{ID: "c", Object: 2}),
			chg(7, flow.Change{ID: "d", Object: 1}),
		},
		want: []flow.Batch{
			{Cause: flow.CauseInitial, Synced: true, Rev: 4, Changes: []flow.Change{{ID: "a", Object: 2}}},
			chg(7, flow.Change{ID: "c", Object: 2}, flow.Change{ID: "d", Object: 1}),
		},
	}, {
		name: "a collapse forgets what the reader never saw come and go",
		puts: []flow.Batch{chg(5, flow.Change{ID: "x", Object: 1}), chg(6, flow.Change{ID: "x", Deleted: true}), chg(7, flow.Change{ID: "y", Object: 1})},
		want: []flow.Batch{chg(7, flow.Change{ID: "y", Object: 1})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(2)
			for _, b := range tt.puts {
				m.Put(b)
			}
			if diff := cmp.Diff(tt.want, drain(t, m)); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueCloseDrainsFirst(t *testing.T) {
	m := New(0)
	m.Put(flow.Batch{Changes: []flow.Change{{ID: "a"}}})
	boom := errors.New("boom")
	m.Close(boom)
	m.Put(flow.Batch{Changes: []flow.Change{{ID: "late"}}})
	if b, err := m.Next(context.Background()); err != nil || len(b.Changes) != 1 || b.Changes[0].ID != "a" {
		t.Fatalf("Next = %v, %v; want the pending batch", b, err)
	}
	if _, err := m.Next(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Next after drain: err = %v, want %v", err, boom)
	}
}

func TestQueueNextWaits(t *testing.T) {
	m := New(0)
	got := make(chan flow.Batch)
	go func() {
		b, _ := m.Next(context.Background())
		got <- b
	}()
	m.Put(flow.Batch{Rev: 7})
	if b := <-got; b.Rev != 7 {
		t.Fatalf("Next = %+v, want rev 7", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a cancelled context: %v", err)
	}
}

// TestQueueKeepsBatchesApart: below MaxQueued, batches come out as they
// went in.
func TestQueueKeepsBatchesApart(t *testing.T) {
	m := New(0)
	for i := 1; i <= 3; i++ {
		m.Put(flow.Batch{Rev: int64(i), Changes: []flow.Change{{ID: "a", Object: i}}})
	}
	for i := 1; i <= 3; i++ {
		b, err := m.Next(context.Background())
		if err != nil || b.Rev != int64(i) || len(b.Changes) != 1 || b.Changes[0].Object != i {
			t.Fatalf("batch %d: %+v, %v", i, b, err)
		}
	}
}

// TestQueueBounded: a million updates of ten ids, nobody reading, leave
// at most MaxQueued batches and at most one change per id plus MaxQueued;
// replayed in order they give the latest state of every id.
func TestQueueBounded(t *testing.T) {
	m := New(0)
	const n = 1_000_000
	for i := 0; i < n; i++ {
		m.Put(flow.Batch{Changes: []flow.Change{{ID: string(rune('a' + i%10)), Object: i}}})
	}
	if got := queuedBatches(m); got > DefaultMaxQueued {
		t.Fatalf("queued batches = %d, want at most %d", got, DefaultMaxQueued)
	}
	if got := queuedChanges(m); got > 10+DefaultMaxQueued {
		t.Fatalf("queued changes = %d, want at most %d", got, 10+DefaultMaxQueued)
	}
	state := map[string]int{}
	for queuedBatches(m) > 0 {
		b, err := m.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b.Changes {
			state[c.ID] = c.Object.(int)
		}
	}
	for id, v := range state {
		if want := n - 10 + int(id[0]-'a'); v != want {
			t.Errorf("id %s: last state %d, want %d", id, v, want)
		}
	}
}

// TestQueueSlowConsumer: a reader that takes one batch while the
// source puts 200 (over 200 ids) never lets the queue grow past one change
// per id plus MaxQueued, however long it goes on. (Merging only into the
// newest batch would let every queued batch fill up with all ids.)
func TestQueueSlowConsumer(t *testing.T) {
	m := New(0)
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%03d", i)
	}
	for round := 0; round < 2000; round++ {
		for i, id := range ids {
			m.Put(flow.Batch{Changes: []flow.Change{{ID: id, Object: round*1000 + i}}})
		}
		if _, err := m.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := queuedChanges(m); got > len(ids)+DefaultMaxQueued {
			t.Fatalf("round %d: %d changes queued, want at most %d", round, got, len(ids)+DefaultMaxQueued)
		}
	}
}

// BenchmarkQueueSlowConsumer: a producer putting single-change batches
// over 1,000 ids while nobody reads; memory stays flat however long it runs.
func BenchmarkQueueSlowConsumer(b *testing.B) {
	m := New(0)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%04d", i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Put(flow.Batch{Changes: []flow.Change{{ID: ids[i%len(ids)], Object: i}}})
	}
}

// benchmarkQueueHeap puts `updates` single-change batches over 10,000
// ids into a queue nobody reads and reports the live heap it holds: it
// must not grow with the number of updates.
func benchmarkQueueHeap(b *testing.B, updates int) {
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("metropolis-%032x", i)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := New(0)
		for u := 0; u < updates; u++ {
			m.Put(flow.Batch{Changes: []flow.Change{{ID: ids[u%len(ids)], Object: u}}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(m)
	}
}

func BenchmarkQueueHeap100kUpdates(b *testing.B) { benchmarkQueueHeap(b, 100_000) }
func BenchmarkQueueHeap1MUpdates(b *testing.B)   { benchmarkQueueHeap(b, 1_000_000) }

// TestQueueChurnBounded: ids created and deleted for good while nobody
// reads do not pile up: the queue stays at about the live ids.
func TestQueueChurnBounded(t *testing.T) {
	m := New(4)
	for i := 0; i < 100_000; i++ {
		id := fmt.Sprintf("lock-%06d", i)
		m.Put(flow.Batch{Changes: []flow.Change{{ID: id, Object: i}}})
		m.Put(flow.Batch{Changes: []flow.Change{{ID: id, Deleted: true}}})
	}
	if got := queuedChanges(m); got > 8 {
		t.Fatalf("%d changes queued after 100k ids came and went, want a handful", got)
	}
}

func queuedBatches(q *Queue) int { n, _ := q.queued(); return n }
func queuedChanges(q *Queue) int { _, n := q.queued(); return n }

// TestQueueCountsMerges: with updates only (no deletions, no bad
// records), every change put is either handed to the reader or counted by
// OnMerge, exactly once, however puts and reads interleave.
func TestQueueCountsMerges(t *testing.T) {
	for seed := range int64(200) {
		r := rand.New(rand.NewPCG(uint64(seed), 0))
		q := New(2 + r.IntN(3))
		merged := 0
		q.OnMerge = func(n int) { merged += n }
		put, got := 0, 0
		for range 50 {
			if r.IntN(3) == 0 {
				for _, b := range drain(t, q) {
					got += len(b.Changes)
				}
				continue
			}
			var b flow.Batch
			for _, id := range r.Perm(4)[:1+r.IntN(4)] {
				b.Changes = append(b.Changes, flow.Change{ID: fmt.Sprint(id), Object: r.Int()})
			}
			q.Put(b)
			put += len(b.Changes)
		}
		for _, b := range drain(t, q) {
			got += len(b.Changes)
		}
		if put != got+merged {
			t.Fatalf("seed %d: %d changes put, %d handed over, %d counted as merged", seed, put, got, merged)
		}
	}
}

// TestQueueFrom: a queue made by NewFrom knows the reader has the ids of
// base: a deletion of one of them is news even when merged, a node made
// and deleted while merging is not, and base is left as it was.
func TestQueueFrom(t *testing.T) {
	chg := func(c ...flow.Change) flow.Batch {
		return flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: c}
	}
	base := []string{"a", "b"}
	q := NewFrom(2, base)
	q.Put(chg(flow.Change{ID: "c", Object: 1}))
	q.Put(chg(flow.Change{ID: "c", Deleted: true}, flow.Change{ID: "a", Deleted: true}))
	q.Put(chg(flow.Change{ID: "b", Object: 2})) // merges the three
	want := []flow.Batch{chg(flow.Change{ID: "a", Deleted: true}, flow.Change{ID: "b", Object: 2})}
	if diff := cmp.Diff(want, drain(t, q)); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	// The reader has b now, not a: a deletion of b is news, of a not.
	q.Put(chg(flow.Change{ID: "d", Object: 3}))
	q.Put(chg(flow.Change{ID: "a", Deleted: true}))
	q.Put(chg(flow.Change{ID: "b", Deleted: true}))
	want = []flow.Batch{chg(flow.Change{ID: "b", Deleted: true}, flow.Change{ID: "d", Object: 3})}
	if diff := cmp.Diff(want, drain(t, q)); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, base); diff != "" {
		t.Errorf("base (-want +got):\n%s", diff)
	}
}

// TestDistinct checks distinct against a set of the ids, on random
// batches of every size its three ways take (pairwise, the pooled
// table, a set of their own), with ids given twice or not, some of
// them the same bytes in strings of their own (not interned).
func TestDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	q := New(0)
	for range 3000 {
		n := rng.IntN(maxPooled + 40)
		universe := n + rng.IntN(3*n+1)
		if rng.IntN(2) == 0 {
			universe = n // ids drawn from as many as the batch holds: mostly given twice
		}
		cs := make([]flow.Change, n)
		want := true
		seen := map[string]bool{}
		for i := range cs {
			id := fmt.Sprintf("/nodes/metropolis-%08x", rng.IntN(universe+1))
			cs[i].ID = string([]byte(id))
			if seen[id] {
				want = false
			}
			seen[id] = true
		}
		if got := q.distinct(cs); got != want {
			t.Fatalf("distinct(%d changes) = %v, want %v", n, got, want)
		}
	}
}
