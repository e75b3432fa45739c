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

// drain returns every queued batch, changes sorted by id.
func drain(t *testing.T, m *Mailbox) []Batch {
	t.Helper()
	var out []Batch
	for m.Len() > 0 {
		b, err := m.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sorted(b))
	}
	return out
}

// TestMailboxMerges: what comes out of a mailbox with MaxQueued 2 that
// nobody read while the batches went in.
func TestMailboxMerges(t *testing.T) {
	chg := func(rev int64, c ...Change) Batch {
		return Batch{Cause: CauseChange, Synced: true, Rev: rev, Changes: c}
	}
	tests := []struct {
		name string
		puts []Batch
		want []Batch
	}{{
		name: "below the limit, batches stay apart",
		puts: []Batch{chg(5, Change{ID: "a", Object: 1}), chg(6, Change{ID: "a", Object: 2})},
		want: []Batch{chg(5, Change{ID: "a", Object: 1}), chg(6, Change{ID: "a", Object: 2})},
	}, {
		name: "at the limit, change batches collapse per id, latest wins",
		puts: []Batch{chg(5, Change{ID: "a", Object: 1}), chg(6, Change{ID: "a", Object: 2}, Change{ID: "b", Object: 1}), chg(7, Change{ID: "a", Object: 3})},
		want: []Batch{chg(7, Change{ID: "a", Object: 3}, Change{ID: "b", Object: 1})},
	}, {
		name: "a full listing replaces queued changes",
		puts: []Batch{chg(5, Change{ID: "a", Object: 1}), {Cause: CauseResync, Synced: true, Rev: 9, Changes: []Change{{ID: "b", Object: 1}}}},
		want: []Batch{{Cause: CauseResync, Synced: true, Rev: 9, Changes: []Change{{ID: "b", Object: 1}}}},
	}, {
		name: "an unread initial listing stays initial, and apart from later changes",
		puts: []Batch{
			{Cause: CauseInitial, Synced: true, Rev: 3, Changes: []Change{{ID: "a", Object: 1}}},
			{Cause: CauseResync, Synced: true, Rev: 4, Changes: []Change{{ID: "a", Object: 2}}},
			chg(5, Change{ID: "c", Object: 1}),
			chg(6, Change{ID: "c", Object: 2}),
			chg(7, Change{ID: "d", Object: 1}),
		},
		want: []Batch{
			{Cause: CauseInitial, Synced: true, Rev: 4, Changes: []Change{{ID: "a", Object: 2}}},
			chg(7, Change{ID: "c", Object: 2}, Change{ID: "d", Object: 1}),
		},
	}, {
		name: "a collapse forgets what the consumer never saw come and go",
		puts: []Batch{chg(5, Change{ID: "x", Object: 1}), chg(6, Change{ID: "x", Deleted: true}), chg(7, Change{ID: "y", Object: 1})},
		want: []Batch{chg(7, Change{ID: "y", Object: 1})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMailbox()
			m.MaxQueued = 2
			for _, b := range tt.puts {
				m.Put(b)
			}
			if diff := cmp.Diff(tt.want, drain(t, m)); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
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

// TestMailboxUndecodable: an undecodable record never hides the state the
// consumer should see last for its id. Each case gives the view the
// follower ends with, batch by batch without a mailbox (want) and through
// a mailbox with MaxQueued 2 (got): they must agree.
func TestMailboxUndecodable(t *testing.T) {
	bad := func(id string) Change { return Change{ID: id, Undecodable: true} }
	chg := func(c ...Change) Batch { return Batch{Cause: CauseChange, Synced: true, Changes: c} }
	tests := []struct {
		name    string
		printed []Change // the view before
		puts    []Batch
	}{
		{"a good state, then bad", []Change{{ID: "a", Object: 0}}, []Batch{chg(Change{ID: "a", Object: 1}), chg(bad("a"))}},
		{"a good state, then a listing where it is bad", []Change{{ID: "a", Object: 0}},
			[]Batch{chg(Change{ID: "a", Object: 1}), {Cause: CauseResync, Synced: true, Changes: []Change{bad("a")}}}},
		{"deleted, then a listing where it is bad", []Change{{ID: "a", Object: 0}},
			[]Batch{chg(Change{ID: "a", Object: 1}), chg(Change{ID: "a", Deleted: true}), {Cause: CauseResync, Synced: true, Changes: []Change{bad("a")}}}},
		{"deleted, something else, then bad", []Change{{ID: "a", Object: 0}},
			[]Batch{chg(Change{ID: "a", Deleted: true}), chg(Change{ID: "b", Object: 1}), chg(bad("a"))}},
		{"a listing without it, something else, then bad", []Change{{ID: "a", Object: 0}},
			[]Batch{{Cause: CauseResync, Synced: true}, chg(Change{ID: "b", Object: 1}), chg(bad("a"))}},
	}
	view := func(f *Follower) map[string]any {
		out := map[string]any{}
		f.Set().Ascend(func(id string, obj any) bool { out[id] = obj; return true })
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := Batch{Cause: CauseInitial, Synced: true, Changes: tt.printed}
			nop := func(Event) error { return nil }

			direct := NewFollower(nil, nil)
			direct.Apply(start, nop)
			for _, b := range tt.puts {
				direct.Apply(b, nop)
			}

			via := NewFollower(nil, nil)
			m := NewMailbox()
			m.MaxQueued = 2
			m.Put(start)
			b, _ := m.Next(context.Background())
			via.Apply(b, nop)
			for _, b := range tt.puts {
				m.Put(b)
			}
			for _, b := range drain(t, m) {
				via.Apply(b, nop)
			}
			if diff := cmp.Diff(view(direct), view(via)); diff != "" {
				t.Errorf("view through the mailbox differs (-direct +mailbox):\n%s", diff)
			}
		})
	}
}

// TestMailboxChurnBounded: ids created and deleted for good while nobody
// reads do not pile up: the queue stays at about the live ids.
func TestMailboxChurnBounded(t *testing.T) {
	m := NewMailbox()
	m.MaxQueued = 4
	for i := 0; i < 100_000; i++ {
		id := fmt.Sprintf("lock-%06d", i)
		m.Put(Batch{Changes: []Change{{ID: id, Object: i}}})
		m.Put(Batch{Changes: []Change{{ID: id, Deleted: true}}})
	}
	if got := m.Pending(); got > 8 {
		t.Fatalf("%d changes queued after 100k ids came and went, want a handful", got)
	}
}
