package nodeset

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sorted(b Batch) Batch {
	sort.Slice(b.Changes, func(i, j int) bool { return b.Changes[i].ID < b.Changes[j].ID })
	return b
}

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

// TestMailboxBounded: a million updates of ten ids leave ten pending.
func TestMailboxBounded(t *testing.T) {
	m := NewMailbox()
	for i := 0; i < 1_000_000; i++ {
		m.Put(Batch{Changes: []Change{{ID: string(rune('a' + i%10)), Object: i}}})
	}
	b, err := m.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 10 {
		t.Fatalf("pending changes = %d, want 10", len(b.Changes))
	}
}
