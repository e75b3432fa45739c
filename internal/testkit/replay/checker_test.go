package replay

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/view"
)

// TestCheckerRules: each rule, broken once, is caught on the line that
// breaks it, naming it; the same stream without the break passes.
func TestCheckerRules(t *testing.T) {
	// Within a batch, events come in id order, each with the revision it
	// reflects: a listing's keys at their mod_revision, a merged batch's
	// changes at theirs, so revs go down as well as up.
	good := []string{
		`{"type":"new","id":"a","object":{"v":1},"rev":2}`,
		`{"type":"new","id":"b","object":{"v":1},"rev":1}`,
		`{"type":"batch_done","batch":1,"synced":true,"cause":"initial","rev":2}`,
		`{"type":"updated","id":"a","changed":[["v"]],"object":{"v":2},"prev":{"v":1},"rev":3}`,
		`{"type":"deleted","id":"b","prev":{"v":1},"rev":4}`,
		`{"type":"batch_done","batch":2,"synced":true,"cause":"change","rev":4}`,
		`{"type":"updated","id":"a","changed":[["v"]],"object":{"v":3},"prev":{"v":2},"rev":7}`,
		`{"type":"new","id":"c","object":{"v":1},"rev":5}`,
		`{"type":"batch_done","batch":3,"synced":true,"cause":"change","rev":7}`,
	}
	for _, tc := range []struct {
		name string
		line int // replaced …
		with string
		want string // … and caught saying this
	}{
		{"new for a present id", 3, `{"type":"new","id":"a","object":{"v":2},"rev":3}`, "new for a, which is present"},
		{"updated for an absent id", 3, `{"type":"updated","id":"c","object":{"v":2},"prev":{"v":1},"rev":3}`, "updated for c, which is absent"},
		{"deleted for an absent id", 4, `{"type":"deleted","id":"c","prev":{"v":1},"rev":4}`, "deleted for c, which is absent"},
		{"prev not what was printed", 3, `{"type":"updated","id":"a","object":{"v":2},"prev":{"v":0},"rev":3}`, "is not the state last printed"},
		{"prev of a deletion not what was printed", 4, `{"type":"deleted","id":"b","prev":{"v":7},"rev":4}`, "is not the state last printed"},
		{"batch skipped", 5, `{"type":"batch_done","batch":3,"synced":true,"rev":4}`, "batch 3 after batch 1"},
		{"batch repeated", 5, `{"type":"batch_done","batch":1,"synced":true,"rev":4}`, "batch 1 after batch 1"},
		{"synced back to false", 5, `{"type":"batch_done","batch":2,"synced":false,"rev":4}`, "synced went back to false"},
		{"event not after the previous batch", 4, `{"type":"deleted","id":"b","prev":{"v":1},"rev":2}`, "rev 2 not after the previous batch's rev 2"},
		{"event after its batch", 5, `{"type":"batch_done","batch":2,"synced":true,"rev":3}`, "batch rev 3 after an event of the batch at rev 4"},
		{"batch rev backwards", 5, `{"type":"batch_done","batch":2,"synced":true,"rev":1}`, "batch rev 1 after batch rev 2: went backwards"},
		{"no rev", 3, `{"type":"updated","id":"a","object":{"v":2},"prev":{"v":1}}`, "without rev"},
		{"not JSON", 3, `{"type":"upd`, "not a JSON event"},
		{"unknown type", 3, `{"type":"changed","id":"a","rev":3}`, `unknown type "changed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Checker{Revs: true}
			for i, l := range good {
				if i == tc.line {
					l = tc.with
				}
				err := c.Line([]byte(l))
				switch {
				case i < tc.line && err != nil:
					t.Fatalf("line %d: %v", i, err)
				case i == tc.line:
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("line %d: %v, want an error saying %q", i, err, tc.want)
					}
					return
				}
			}
		})
	}
	c := &Checker{Revs: true}
	for _, l := range good {
		if err := c.Line([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.Equal(map[string]any{"a": `{ "v" : 3 }`, "c": `{"v":1}`}); d != "" {
		t.Errorf("good stream: %s", d)
	}
	if d := c.Equal(map[string]any{"a": map[string]int{"v": 4}, "d": "{}"}); !strings.Contains(d, `a: {"v":3}, want {"v":4}`) || !strings.Contains(d, "d: missing") {
		t.Errorf("differences: %q", d)
	}
	if err := c.Line([]byte(good[6])); err == nil {
		t.Error("a line replayed twice passed")
	}
}

// TestCheckerModel: random sources (puts, deletes, full listings that
// drop ids) run through the real follower and encoder; the checker
// accepts every stream and ends equal to the source. The same stream
// with one event line dropped is caught, either on a line or at the end.
func TestCheckerModel(t *testing.T) {
	seeds := 500
	if testing.Short() {
		seeds = 50
	}
	caught, broken := 0, 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 2))
		lines, source := randomStream(t, rng)
		c := &Checker{}
		for i, l := range lines {
			if err := c.Line(l); err != nil {
				t.Fatalf("seed %d line %d: %v", seed, i, err)
			}
		}
		if d := c.Equal(source); d != "" {
			t.Fatalf("seed %d: replayed stream differs from the source:\n%s", seed, d)
		}

		// Break the stream: drop an event line.
		var evs []int
		for i, l := range lines {
			if !bytes.Contains(l, []byte(`"batch_done"`)) {
				evs = append(evs, i)
			}
		}
		if len(evs) == 0 {
			continue
		}
		bad := slicesClone(lines)
		drop := evs[rng.IntN(len(evs))]
		bad = append(bad[:drop], bad[drop+1:]...)
		broken++
		if !rejects(bad, source) {
			t.Errorf("seed %d: dropping line %d (%s) went unnoticed", seed, drop, lines[drop])
			continue
		}
		caught++
	}
	t.Logf("%d streams checked, %d broken ones, all caught", seeds, caught)
}

// rejects reports whether a checker finds fault with lines, on a line or
// at the end against source.
func rejects(lines [][]byte, source map[string]any) bool {
	c := &Checker{}
	for _, l := range lines {
		if c.Line(l) != nil {
			return true
		}
	}
	return c.Equal(source) != ""
}

func slicesClone(l [][]byte) [][]byte { return append([][]byte(nil), l...) }

// randomStream runs random batches through a view.Follower and a
// stream.Encoder (NDJSON), and returns the lines printed and the
// source's final state.
func randomStream(t *testing.T, rng *rand.Rand) ([][]byte, map[string]any) {
	t.Helper()
	var out bytes.Buffer
	enc := stream.NewEncoder(&out, stream.Options{})
	f := view.NewFollower(nil, nil)
	source := map[string]string{}
	obj := func() string { return fmt.Sprintf(`{"v":%d,"w":[%d]}`, rng.IntN(4), rng.IntN(2)) }
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for step := range 30 {
		b := flow.Batch{Cause: flow.CauseChange, Synced: true}
		if step == 0 || rng.IntN(8) == 0 {
			b.Cause = flow.CauseResync
			if step == 0 {
				b.Cause = flow.CauseInitial
			}
			source = map[string]string{}
			for _, id := range ids {
				if rng.IntN(2) == 0 {
					source[id] = obj()
					b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(source[id]))})
				}
			}
		} else {
			for range 1 + rng.IntN(3) {
				id := ids[rng.IntN(len(ids))]
				if rng.IntN(3) == 0 {
					delete(source, id)
					b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true})
					continue
				}
				source[id] = obj()
				b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(source[id]))})
			}
		}
		if err := f.Apply(b, enc.Encode); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	want := make(map[string]any, len(source))
	for id, o := range source {
		want[id] = o
	}
	return bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")), want
}
