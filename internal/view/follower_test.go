package view

import (
	"github.com/nodewatch/nodewatch/internal/flow"

	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// line is an flow.Event reduced to what a test cares about.
type line struct {
	Type      string
	ID        string
	Obj, Prev any
	Batch     int
	Cause     string
	Synced    bool
	Counts    flow.Counts
}

func run(t *testing.T, f *Follower, batches ...flow.Batch) []line {
	t.Helper()
	var out []line
	for _, b := range batches {
		err := f.Apply(b, func(e flow.Event) error {
			l := line{Type: e.Type.String(), ID: e.ID, Obj: e.Object, Prev: e.Prev}
			if e.Type == flow.BatchDone {
				l = line{Type: "batch_done", Batch: e.Batch, Cause: e.Cause.String(), Synced: e.Synced, Counts: e.Counts}
			}
			out = append(out, l)
			return nil
		})
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	return out
}

func put(id string, v any) flow.Change { return flow.Change{ID: id, Object: v} }
func del(id string) flow.Change        { return flow.Change{ID: id, Deleted: true} }
func initial(c ...flow.Change) flow.Batch {
	return flow.Batch{Cause: flow.CauseInitial, Synced: true, Changes: c}
}
func change(c ...flow.Change) flow.Batch {
	return flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: c}
}
func resync(c ...flow.Change) flow.Batch {
	return flow.Batch{Cause: flow.CauseResync, Synced: true, Changes: c}
}

func done(n int, cause string, c flow.Counts) line {
	return line{Type: "batch_done", Batch: n, Cause: cause, Synced: true, Counts: c}
}

// positive matches objects that are ints > 0.
func positive(_ string, obj any) (bool, error) { return obj.(int) > 0, nil }

func TestFollower(t *testing.T) {
	tests := []struct {
		name    string
		filter  func(string, any) (bool, error)
		batches []flow.Batch
		want    []line
	}{{
		name:    "initial in id order",
		batches: []flow.Batch{initial(put("b", 2), put("a", 1), put("c", 3))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, {Type: "new", ID: "b", Obj: 2}, {Type: "new", ID: "c", Obj: 3},
			done(1, "initial", flow.Counts{New: 3}),
		},
	}, {
		name:    "empty initial still ends in batch_done",
		batches: []flow.Batch{initial()},
		want:    []line{done(1, "initial", flow.Counts{})},
	}, {
		name:    "update, identical re-put, delete",
		batches: []flow.Batch{initial(put("a", 1)), change(put("a", 2)), change(put("a", 2)), change(del("a"))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, done(1, "initial", flow.Counts{New: 1}),
			{Type: "updated", ID: "a", Obj: 2, Prev: 1}, done(2, "change", flow.Counts{Updated: 1}),
			{Type: "deleted", ID: "a", Prev: 2}, done(3, "change", flow.Counts{Deleted: 1}),
		},
	}, {
		name:    "deleted id comes back as new, and goes again as deleted",
		batches: []flow.Batch{initial(put("a", 1)), change(del("a")), change(put("a", 5)), change(del("a"))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, done(1, "initial", flow.Counts{New: 1}),
			{Type: "deleted", ID: "a", Prev: 1}, done(2, "change", flow.Counts{Deleted: 1}),
			{Type: "new", ID: "a", Obj: 5}, done(3, "change", flow.Counts{New: 1}),
			{Type: "deleted", ID: "a", Prev: 5}, done(4, "change", flow.Counts{Deleted: 1}),
		},
	}, {
		name:    "filter: starts matching, stops, comes back, is deleted",
		filter:  positive,
		batches: []flow.Batch{initial(put("a", 0)), change(put("a", 1)), change(put("a", -1)), change(put("a", 2)), change(del("a"))},
		want: []line{
			done(1, "initial", flow.Counts{}),
			{Type: "new", ID: "a", Obj: 1}, done(2, "change", flow.Counts{New: 1}),
			{Type: "deleted", ID: "a", Prev: 1}, done(3, "change", flow.Counts{Deleted: 1}),
			{Type: "new", ID: "a", Obj: 2}, done(4, "change", flow.Counts{New: 1}),
			{Type: "deleted", ID: "a", Prev: 2}, done(5, "change", flow.Counts{Deleted: 1}),
		},
	}, {
		name:    "tombstones only, for unknown and known ids",
		batches: []flow.Batch{initial(put("a", 1)), change(del("x"), del("y")), change(del("a"), del("z"))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, done(1, "initial", flow.Counts{New: 1}),
			{Type: "deleted", ID: "a", Prev: 1}, done(2, "change", flow.Counts{Deleted: 1}),
		},
	}, {
		name:    "put then delete of a new id within one batch prints nothing",
		batches: []flow.Batch{initial(), change(put("a", 1), del("a"))},
		want:    []line{done(1, "initial", flow.Counts{})},
	}, {
		name:    "changes to one id coalesce, last wins",
		batches: []flow.Batch{initial(put("a", 1)), change(put("a", 2), put("a", 3), put("b", 1))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, done(1, "initial", flow.Counts{New: 1}),
			{Type: "updated", ID: "a", Obj: 3, Prev: 1}, {Type: "new", ID: "b", Obj: 1}, done(2, "change", flow.Counts{New: 1, Updated: 1}),
		},
	}, {
		name:    "resync prints only differences, deletes included",
		batches: []flow.Batch{initial(put("a", 1), put("b", 1), put("c", 1)), resync(put("a", 1), put("c", 2), put("d", 1))},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, {Type: "new", ID: "b", Obj: 1}, {Type: "new", ID: "c", Obj: 1}, done(1, "initial", flow.Counts{New: 3}),
			{Type: "deleted", ID: "b", Prev: 1}, {Type: "updated", ID: "c", Obj: 2, Prev: 1}, {Type: "new", ID: "d", Obj: 1},
			done(2, "resync", flow.Counts{New: 1, Updated: 1, Deleted: 1}),
		},
	}, {
		name: "an undecodable record keeps what was printed, also through a resync",
		batches: []flow.Batch{
			initial(put("a", 1), put("b", 1)),
			change(flow.Change{ID: "a", Undecodable: true}),
			resync(flow.Change{ID: "a", Undecodable: true}),
			change(put("a", 2)),
		},
		want: []line{
			{Type: "new", ID: "a", Obj: 1}, {Type: "new", ID: "b", Obj: 1}, done(1, "initial", flow.Counts{New: 2}),
			{Type: "deleted", ID: "b", Prev: 1}, done(2, "resync", flow.Counts{Deleted: 1}),
			{Type: "updated", ID: "a", Obj: 2, Prev: 1}, done(3, "change", flow.Counts{Updated: 1}),
		},
	}, {
		name:    "resync with no differences still says so",
		batches: []flow.Batch{initial(put("a", 1)), resync(put("a", 1))},
		want:    []line{{Type: "new", ID: "a", Obj: 1}, done(1, "initial", flow.Counts{New: 1}), done(2, "resync", flow.Counts{})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, NewFollower(tt.filter, nil), tt.batches...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFollowerEqualsKeepsPrintedState(t *testing.T) {
	// Equals compares tens only: 11 and 12 are "the same".
	tens := func(_ string, a, b any) (bool, error) { return a.(int)/10 == b.(int)/10, nil }
	f := NewFollower(nil, tens)
	got := run(t, f, initial(put("a", 11)), change(put("a", 12)), change(put("a", 21)))
	want := []line{
		{Type: "new", ID: "a", Obj: 11}, done(1, "initial", flow.Counts{New: 1}),
		// No line for 12; prev of the next update is what was printed.
		{Type: "updated", ID: "a", Obj: 21, Prev: 11}, done(2, "change", flow.Counts{Updated: 1}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestFollowerFilterError(t *testing.T) {
	boom := func(string, any) (bool, error) { return false, fmt.Errorf("boom") }
	f := NewFollower(boom, nil)
	err := f.Apply(initial(put("a", 1)), func(flow.Event) error { return nil })
	if err == nil {
		t.Fatal("Apply: got nil error, want the filter's")
	}
}

// applier is what the follower benchmarks drive: Follower, or the
// rescanning follower they compare it with.
type applier interface {
	Apply(b flow.Batch, emit func(flow.Event) error) error
}

// rescanFollower is the follower as the original library wrote it, the
// baseline of the follower benchmarks: it keeps the source's whole state,
// and every batch re-filters and re-sorts all of it, then compares it
// with what it printed.
type rescanFollower struct {
	filter  func(id string, obj any) (bool, error)
	source  map[string]any
	printed map[string]any
}

func (f *rescanFollower) Apply(b flow.Batch, emit func(flow.Event) error) error {
	if b.Full() {
		clear(f.source)
	}
	for _, c := range b.Changes {
		if c.Deleted {
			delete(f.source, c.ID)
		} else {
			f.source[c.ID] = c.Object
		}
	}
	var ids []string
	for id, obj := range f.source {
		if f.filter != nil {
			if ok, err := f.filter(id, obj); err != nil || !ok {
				continue
			}
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var counts flow.Counts
	for _, id := range ids {
		obj := f.source[id]
		prev, had := f.printed[id]
		switch {
		case !had:
			counts.New++
			emit(flow.Event{Type: flow.New, ID: id, Object: obj})
		case !reflect.DeepEqual(prev, obj):
			counts.Updated++
			emit(flow.Event{Type: flow.Updated, ID: id, Object: obj, Prev: prev})
		default:
			continue
		}
		f.printed[id] = obj
	}
	for id, prev := range f.printed {
		if _, ok := f.source[id]; !ok {
			counts.Deleted++
			emit(flow.Event{Type: flow.Deleted, ID: id, Prev: prev})
			delete(f.printed, id)
		}
	}
	return emit(flow.Event{Type: flow.BatchDone, Counts: counts})
}

// TestRescanFollowerAgrees: the benchmarks' baseline prints the same
// events as the follower for a run of single-change batches, so that the
// comparison is between two followers that do the same job.
func TestRescanFollowerAgrees(t *testing.T) {
	keep := func(_ string, obj any) (bool, error) { return obj.(int)%3 != 0, nil }
	f, r := NewFollower(keep, nil), &rescanFollower{filter: keep, source: map[string]any{}, printed: map[string]any{}}
	record := func(a applier, b flow.Batch) []string {
		var out []string
		a.Apply(b, func(ev flow.Event) error {
			if ev.Type != flow.BatchDone {
				out = append(out, fmt.Sprintf("%v %s %v %v", ev.Type, ev.ID, ev.Object, ev.Prev))
			}
			return nil
		})
		return out
	}
	var full []flow.Change
	for i := range 100 {
		full = append(full, put(fmt.Sprintf("id-%03d", i), i))
	}
	batches := []flow.Batch{initial(full...)}
	for i := range 300 {
		c := put(fmt.Sprintf("id-%03d", (i*37)%120), i)
		if i%11 == 0 {
			c = flow.Change{ID: c.ID, Deleted: true}
		}
		batches = append(batches, change(c))
	}
	for i, b := range batches {
		if diff := cmp.Diff(record(f, b), record(r, b)); diff != "" {
			t.Fatalf("batch %d (-follower +rescan):\n%s", i, diff)
		}
	}
}

// benchmarkOneChange measures a batch that changes one id in a set of n.
func benchmarkOneChange(b *testing.B, f applier, n int) {
	full := make([]flow.Change, n)
	for i := range full {
		full[i] = put(fmt.Sprintf("id-%08d", i), i)
	}
	if err := f.Apply(initial(full...), func(flow.Event) error { return nil }); err != nil {
		b.Fatal(err)
	}
	emit := func(flow.Event) error { return nil }
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = full[(i*7919)%n].ID // spread over the whole set
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A state never seen before: every batch prints one updated.
		if err := f.Apply(change(put(ids[i%len(ids)], -i-1)), emit); err != nil {
			b.Fatal(err)
		}
	}
}

func newRescan() *rescanFollower {
	return &rescanFollower{source: map[string]any{}, printed: map[string]any{}}
}

func BenchmarkFollowerOneChange1k(b *testing.B) { benchmarkOneChange(b, NewFollower(nil, nil), 1_000) }
func BenchmarkFollowerOneChange100k(b *testing.B) {
	benchmarkOneChange(b, NewFollower(nil, nil), 100_000)
}
func BenchmarkFollowerRescan1k(b *testing.B)   { benchmarkOneChange(b, newRescan(), 1_000) }
func BenchmarkFollowerRescan100k(b *testing.B) { benchmarkOneChange(b, newRescan(), 100_000) }

// TestFilterOncePerState: the filter runs once for each state a change
// brings, never again for a state in the view: that an object in the
// view matched is what its being there says. Random batches and resyncs
// over a few ids; the filter counts its calls by object.
func TestFilterOncePerState(t *testing.T) {
	calls := map[*int]int{}
	f := NewFollower(func(id string, obj any) (bool, error) {
		calls[obj.(*int)]++
		return *obj.(*int)%3 != 0, nil
	}, func(id string, a, b any) (bool, error) { return *a.(*int) == *b.(*int), nil })
	changes := 0
	for i := range 500 {
		b := flow.Batch{Cause: flow.CauseChange, Synced: true}
		if i%50 == 0 {
			b.Cause = flow.CauseResync
		}
		for j := range 1 + i%7 {
			v := new(int)
			*v = (i*7 + j*13) % 10
			b.Changes = append(b.Changes, flow.Change{ID: fmt.Sprint("id", (i+j)%5), Object: v})
		}
		changes += len(b.Changes)
		if err := f.Apply(b, func(flow.Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for obj, n := range calls {
		if n != 1 {
			t.Fatalf("a state (%d) was filtered %d times", *obj, n)
		}
		total += n
	}
	// Changes to one id within a batch coalesce: only the last is filtered.
	if total == 0 || total > changes {
		t.Errorf("%d filter calls for %d changes", total, changes)
	}
}

// BenchmarkFollowerTxn50 measures a batch of 50 changes to distinct ids
// in random order, as one etcd transaction brings them, in a set of 1,000.
func BenchmarkFollowerTxn50(b *testing.B) {
	f := NewFollower(nil, nil)
	full := make([]flow.Change, 1000)
	for i := range full {
		full[i] = put(fmt.Sprintf("/registry/nodes/node-%08d", i), i)
	}
	if err := f.Apply(initial(full...), func(flow.Event) error { return nil }); err != nil {
		b.Fatal(err)
	}
	batch := make([]flow.Change, 50)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range batch {
			batch[k] = put(full[(i*50+k*7919)%len(full)].ID, -i-1)
		}
		if err := f.Apply(change(batch...), func(flow.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
