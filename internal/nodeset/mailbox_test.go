package nodeset

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sorted(b Batch) Batch {
	sort.Slice(b.Changes, func(i, j int) bool { return b.Changes[i].ID < b.Changes[j].ID })
	return b
}

// TestMailboxMerges: with MaxQueued 1, every batch merges into the one
// queued.
func TestMailboxMerges(t *testing.T) {
	tests := []struct {
		name string
		puts []Batch
		want Batch
	}{{
		name: "changes merge per id, latest wins",
		puts: []Batch{
			{Cause: CauseChange, Synced: true, Rev: 5, Changes: []Change{{ID: "a", Object: 1, Rev: 5}}},
			{Cause: CauseChange, Synced: true, Rev: 6, Changes: []Change{{ID: "a", Object: 2, Rev: 6}, {ID: "b", Deleted: true, Rev: 6}}},
		},
		want: Batch{Cause: CauseChange, Synced: true, Rev: 6, Changes: []Change{{ID: "a", Object: 2, Rev: 6}, {ID: "b", Deleted: true, Rev: 6}}},
	}, {
		name: "a full listing replaces pending changes",
		puts: []Batch{
			{Cause: CauseChange, Rev: 5, Changes: []Change{{ID: "a", Object: 1}}},
			{Cause: CauseResync, Synced: true, Rev: 9, Changes: []Change{{ID: "b", Object: 1}}},
		},
		want: Batch{Cause: CauseResync, Synced: true, Rev: 9, Changes: []Change{{ID: "b", Object: 1}}},
	}, {
		name: "changes after an unread initial listing stay initial",
		puts: []Batch{
			{Cause: CauseInitial, Synced: true, Rev: 3, Changes: []Change{{ID: "a", Object: 1}}},
			{Cause: CauseResync, Synced: true, Rev: 4, Changes: []Change{{ID: "a", Object: 2}}},
			{Cause: CauseChange, Synced: true, Rev: 5, Changes: []Change{{ID: "c", Object: 1}}},
		},
		want: Batch{Cause: CauseInitial, Synced: true, Rev: 5, Changes: []Change{{ID: "a", Object: 2}, {ID: "c", Object: 1}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMailbox()
			m.MaxQueued = 1
			for _, b := range tt.puts {
				m.Put(b)
			}
			got, err := m.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, sorted(got)); diff != "" {
				t.Errorf("batch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMailboxCloseDrainsFirst(t *testing.T) {
	m := NewMailbox()
	m.Put(Batch{Changes: []Change{{ID: "a"}}})
	boom := errors.New("boom")
	m.Close(boom)
	m.Put(Batch{Changes: []Change{{ID: "late"}}})
	if b, err := m.Next(context.Background()); err != nil || len(b.Changes) != 1 || b.Changes[0].ID != "a" {
		t.Fatalf("Next = %v, %v; want the pending batch", b, err)
	}
	if _, err := m.Next(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Next after drain: err = %v, want %v", err, boom)
	}
}

func TestMailboxNextWaits(t *testing.T) {
	m := NewMailbox()
	got := make(chan Batch)
	go func() {
		b, _ := m.Next(context.Background())
		got <- b
	}()
	m.Put(Batch{Rev: 7})
	if b := <-got; b.Rev != 7 {
		t.Fatalf("Next = %+v, want rev 7", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a cancelled context: %v", err)
	}
}

// TestMailboxKeepsBatchesApart: below MaxQueued, batches come out as they
// went in.
func TestMailboxKeepsBatchesApart(t *testing.T) {
	m := NewMailbox()
	for i := 1; i <= 3; i++ {
		m.Put(Batch{Rev: int64(i), Changes: []Change{{ID: "a", Object: i}}})
	}
	for i := 1; i <= 3; i++ {
		b, err := m.Next(context.Background())
		if err != nil || b.Rev != int64(i) || len(b.Changes) != 1 || b.Changes[0].Object != i {
			t.Fatalf("batch %d: %+v, %v", i, b, err)
		}
	}
}

// TestMailboxBounded: a million updates of ten ids, nobody reading, leave
// at most MaxQueued batches and at most one change per id plus MaxQueued;
// replayed in order they give the latest state of every id.
func TestMailboxBounded(t *testing.T) {
	m := NewMailbox()
	const n = 1_000_000
	for i := 0; i < n; i++ {
		m.Put(Batch{Changes: []Change{{ID: string(rune('a' + i%10)), Object: i}}})
	}
	if got := m.Len(); got > DefaultMaxQueued {
		t.Fatalf("queued batches = %d, want at most %d", got, DefaultMaxQueued)
	}
	if got := m.Pending(); got > 10+DefaultMaxQueued {
		t.Fatalf("queued changes = %d, want at most %d", got, 10+DefaultMaxQueued)
	}
	state := map[string]int{}
	for m.Len() > 0 {
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

// TestMailboxSlowConsumer: a consumer that takes one batch while the
// source puts 200 (over 200 ids) never lets the queue grow past one change
// per id plus MaxQueued, however long it goes on. (Merging only into the
// newest batch would let every queued batch fill up with all ids.)
func TestMailboxSlowConsumer(t *testing.T) {
	m := NewMailbox()
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%03d", i)
	}
	for round := 0; round < 2000; round++ {
		for i, id := range ids {
			m.Put(Batch{Changes: []Change{{ID: id, Object: round*1000 + i}}})
		}
		if _, err := m.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := m.Pending(); got > len(ids)+DefaultMaxQueued {
			t.Fatalf("round %d: %d changes queued, want at most %d", round, got, len(ids)+DefaultMaxQueued)
		}
	}
}

// BenchmarkMailboxSlowConsumer: a producer putting single-change batches
// over 1,000 ids while nobody reads; memory stays flat however long it runs.
func BenchmarkMailboxSlowConsumer(b *testing.B) {
	m := NewMailbox()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%04d", i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Put(Batch{Changes: []Change{{ID: ids[i%len(ids)], Object: i}}})
	}
}

// benchmarkMailboxHeap puts `updates` single-change batches over 10,000
// ids into a mailbox nobody reads and reports the live heap it holds: it
// must not grow with the number of updates.
func benchmarkMailboxHeap(b *testing.B, updates int) {
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("metropolis-%032x", i)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewMailbox()
		for u := 0; u < updates; u++ {
			m.Put(Batch{Changes: []Change{{ID: ids[u%len(ids)], Object: u}}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(m)
	}
}

func BenchmarkMailboxHeap100kUpdates(b *testing.B) { benchmarkMailboxHeap(b, 100_000) }
func BenchmarkMailboxHeap1MUpdates(b *testing.B)   { benchmarkMailboxHeap(b, 1_000_000) }

// TestMailboxUndecodableKeepsQueuedState: a record that turns bad after a
// state nobody has read yet does not hide that state, whether the bad
// record merges into a queued batch or comes in a full listing.
func TestMailboxUndecodableKeepsQueuedState(t *testing.T) {
	bad := Change{ID: "a", Undecodable: true}
	tests := []struct {
		name string
		puts []Batch
		want Change
	}{
		{"merged", []Batch{{Changes: []Change{{ID: "a", Object: "S2"}}}, {Changes: []Change{bad}}}, Change{ID: "a", Object: "S2"}},
		{"full listing", []Batch{{Changes: []Change{{ID: "a", Object: "S2"}}}, {Cause: CauseResync, Changes: []Change{bad}}}, Change{ID: "a", Object: "S2"}},
		{"after a delete it stays bad", []Batch{{Changes: []Change{{ID: "a", Deleted: true}}}, {Changes: []Change{bad}}}, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMailbox()
			m.MaxQueued = 1
			for _, b := range tt.puts {
				m.Put(b)
			}
			b, err := m.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Change{tt.want}, b.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}
