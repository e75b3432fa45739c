//go:build unix

package state

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// TestInFlight: what is marked in flight outlives the file's closing;
// Record clears the ids it records and only those; a file made before
// the bucket existed reads as nothing in flight, and gets it on its
// first mark.
func TestInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	s := open(t, path)
	m := model{}
	m.apply(t, s, 1, 10, []flow.Event{{Type: flow.New, ID: "a", Object: doc(`{"v":1}`)}, {Type: flow.New, ID: "b", Object: doc(`{"v":1}`)}})
	if evs, err := s.InFlight(); err != nil || len(evs) != 0 {
		t.Fatalf("InFlight of a file with nothing marked: %v, %v", evs, err)
	}
	batch := []flow.Event{
		{Type: flow.Updated, ID: "a", Object: doc(`{"v":2}`), Prev: doc(`{"v":1}`)},
		{Type: flow.Deleted, ID: "b", Prev: doc(`{"v":1}`)},
		{Type: flow.New, ID: "c", Object: doc(`{"v":3}`)},
	}
	if err := s.MarkInFlight(batch); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, path)
	if !s.Resumed() {
		t.Fatal("a file with a batch in flight is not resumed")
	}
	want := `a updated {"v":2}; b deleted {"v":1}; c new {"v":3}; `
	if got := inFlight(t, s); got != want {
		t.Fatalf("in flight after reopening: %s, want %s", got, want)
	}
	checkView(t, s, m, 10) // the view is untouched
	// A batch cut short records a and c: b stays in flight.
	m.apply(t, s, 2, 11, []flow.Event{batch[0], batch[2]})
	if got, want := inFlight(t, s), `b deleted {"v":1}; `; got != want {
		t.Fatalf("in flight after recording a and c: %s, want %s", got, want)
	}
	m.apply(t, s, 3, 12, []flow.Event{batch[1]})
	if got := inFlight(t, s); got != "" {
		t.Fatalf("in flight after recording b: %s, want nothing", got)
	}
	s.Close()

	// A file without the bucket, as files were before it existed.
	update(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(inflightBucket) })
	s = open(t, path)
	defer s.Close()
	if got := inFlight(t, s); got != "" {
		t.Fatalf("in flight in a file without the bucket: %s", got)
	}
	if err := s.MarkInFlight(batch[2:]); err != nil {
		t.Fatal(err)
	}
	if got, want := inFlight(t, s), `c new {"v":3}; `; got != want {
		t.Fatalf("in flight: %s, want %s", got, want)
	}
}

func inFlight(t *testing.T, s *Store) string {
	t.Helper()
	evs, err := s.InFlight()
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, ev := range evs {
		o := ev.Object
		if ev.Type == flow.Deleted {
			o = ev.Prev
		}
		out += ev.ID + " " + ev.Type.String() + " " + string(o.(interface{ JSON() []byte }).JSON()) + "; "
	}
	return out
}
