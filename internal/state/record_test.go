//go:build unix

package state

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// What recording costs: the pages a Record writes, and its time.

// TestRecordWritesTheBatch: recording one change writes as many pages in
// a view of 100,000 objects as in one of 1,000, give or take the depth
// of the tree; rewriting the view would write thousands.
func TestRecordWritesTheBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a view of 100,000 objects")
	}
	writes := map[int]int{}
	for _, n := range []int{1000, 100_000} {
		path := filepath.Join(t.TempDir(), "state")
		s := open(t, path)
		// Small objects, for a view that is quick to make and deep.
		fillWith(t, s, n, `{"state":"NODE_STATE_UP"}`)
		st := s.db.Stats()
		before := st.TxStats.GetWrite()
		fiBefore, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		const batches = 20
		for i := range batches {
			ev := flow.Event{Type: flow.Updated, ID: id(i * 37 % n), Object: doc(`{"state":"NODE_STATE_` + strconv.Itoa(i) + `"}`)}
			if err := s.Record(s.Batch()+1, int64(n+i), []flow.Event{ev}); err != nil {
				t.Fatal(err)
			}
		}
		st = s.db.Stats()
		after := st.TxStats.GetWrite()
		fiAfter, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		writes[n] = int(after-before) / batches
		t.Logf("view of %d: %.1f page writes a Record, file %d → %d bytes", n, float64(after-before)/batches, fiBefore.Size(), fiAfter.Size())
		// A Record writes the changed leaf, its branches, the meta
		// bucket's, the root's, the freelist: a handful.
		if writes[n] > 10 {
			t.Errorf("view of %d: %d page writes a Record, want a handful", n, writes[n])
		}
		// The file does not grow by more than a few pages either.
		if grown := fiAfter.Size() - fiBefore.Size(); grown > 64<<10 {
			t.Errorf("view of %d: the file grew by %d bytes in %d Records of one change", n, grown, batches)
		}
	}
	if writes[100_000] > writes[1000]+3 {
		t.Errorf("page writes a Record: %d in a view of 100,000, %d in one of 1,000: want about the same", writes[100_000], writes[1000])
	}
}

// BenchmarkRecord records one updated object a batch into a view of 1,000
// and one of 100,000 objects: the cost should not grow with the view.
// bbolt's fsyncs of each commit take most of it.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchRecord(b, n, false, false) })
	}
}

// BenchmarkRecordNoSync is BenchmarkRecord without the fsyncs: what is
// left is the CPU and the page cache, which grow with the depth of the
// tree (the log of the view).
func BenchmarkRecordNoSync(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchRecord(b, n, true, false) })
	}
}

// BenchmarkDeliver is what --state costs a delivered batch of one
// object: noted in flight, then recorded (two commits), beside
// BenchmarkRecord's one.
func BenchmarkDeliver(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchRecord(b, n, false, true) })
	}
}

// benchRecord records one updated object a batch into a view of n
// objects, without fsyncs if noSync, and noting each batch in flight
// first if deliver.
func benchRecord(b *testing.B, n int, noSync, deliver bool) {
	path := filepath.Join(b.TempDir(), "state")
	s := open(b, path)
	defer s.Close()
	fill(b, s, n)
	s.db.NoSync = noSync
	docs := []*jsondoc.Doc{
		doc(strings.Replace(testkit.NodeJSON, "NODE_STATE_UP", "NODE_STATE_DOWN", 1)),
		doc(testkit.NodeJSON),
	}
	events := make([]flow.Event, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		events[0] = flow.Event{Type: flow.Updated, ID: id(i * 7919 % n), Object: docs[i%2]}
		if deliver {
			if err := s.MarkInFlight(events); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Record(s.Batch()+1, int64(n+i), events); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
