package handoff

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/view"
)

// The model-based test of the hand-off: a random source (puts, deletes,
// bad records, full listings and resyncs over a few ids) feeds one
// follower directly and another through a Queue whose reader reads at
// random moments, from very slowly to eagerly. The follower fed directly
// is the model: its views after each batch are the views the source
// really had. After every batch the reader gets, its view must be one of
// them, never an older one than before; at the end it must be the last.
// In some cases the reader gets the initial listing directly, and the
// queue starts from its ids (NewFrom), as serve's streams do.

// modelSeeds is how many random cases `go test` runs: seeds 0 to
// modelSeeds-1. NODEWATCH_MODEL_SEEDS=N runs N instead, NODEWATCH_MODEL_SEED=S
// only seed S; make fuzz runs FuzzQueueModel for longer.
const modelSeeds = 5000

func TestQueueModel(t *testing.T) {
	n := uint64(modelSeeds)
	if s := os.Getenv("NODEWATCH_MODEL_SEEDS"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NODEWATCH_MODEL_SEEDS: %v", err)
		}
		n = v
	}
	if testing.Short() {
		n = 500
	}
	first := uint64(0)
	if s := os.Getenv("NODEWATCH_MODEL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NODEWATCH_MODEL_SEED: %v", err)
		}
		first, n = v, v+1
	}
	for seed := first; seed < n; seed++ {
		if err := runModel(seed, 200); err != nil {
			t.Fatalf("seed %d: %v\n(replay: NODEWATCH_MODEL_SEED=%d go test ./internal/handoff -run TestQueueModel)", seed, err, seed)
		}
	}
}

// FuzzQueueModel runs the model with seeds and lengths chosen by the
// fuzzer (make fuzz).
func FuzzQueueModel(f *testing.F) {
	f.Add(uint64(0), uint16(200))
	f.Add(uint64(7), uint16(1000))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		if err := runModel(seed, int(steps)); err != nil {
			t.Fatal(err)
		}
	})
}

// modelCase is one random run.
type modelCase struct {
	rng       *rand.Rand
	ids       []string
	maxQueued int
	// from: the queue is NewFrom's, rebasing after rebaseAt ids (0: the
	// default).
	from     bool
	rebaseAt int
	// pairwiseAt: the queue checks the ids of a batch longer than this
	// for distinctness through a set (0: the default).
	pairwiseAt int
	filter     func(string, any) (bool, error)
	equals     func(string, any, any) (bool, error)
	// recycle: the reader gives each change batch back (Recycle) once
	// it applied it, at once or after it read the next.
	recycle bool
	// source is the source's state, a bad record keeping the last good
	// state (or the absence) of its id.
	source map[string]int
	trace  []string // what happened, for the failure message
}

func runModel(seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, 0x6e6f6465))
	m := &modelCase{rng: rng, maxQueued: 2 + rng.IntN(4), source: map[string]int{}}
	for i := range 1 + rng.IntN(6) {
		m.ids = append(m.ids, string(rune('a'+i)))
	}
	readP := []float64{0.02, 0.1, 0.3, 0.6, 0.9}[rng.IntN(5)]
	if rng.IntN(3) == 0 {
		m.from, m.rebaseAt = true, rng.IntN(4)
	}
	if rng.IntN(2) == 0 {
		m.pairwiseAt = 1 + rng.IntN(3)
	}
	if rng.IntN(2) == 0 {
		m.filter = func(_ string, o any) (bool, error) { return o.(int)%3 != 0, nil }
	}
	if rng.IntN(2) == 0 {
		m.equals = func(_ string, a, b any) (bool, error) { return a.(int)/10 == b.(int)/10, nil }
	}
	m.recycle = rng.IntN(3) != 0
	err := m.run(steps, readP)
	if err != nil {
		return fmt.Errorf("%w\nids %v, MaxQueued %d, from %v (rebase at %d), filter %v, equals %v, recycle %v, read chance %v; trace:\n%s",
			err, m.ids, m.maxQueued, m.from, m.rebaseAt, m.filter != nil, m.equals != nil, m.recycle, readP, joinLines(m.trace))
	}
	return nil
}

func (m *modelCase) run(steps int, readP float64) error {
	direct := view.NewFollower(m.filter, m.equals)
	through := view.NewFollower(m.filter, m.equals)
	q := New(m.maxQueued)
	q.pairwiseAt = m.pairwiseAt
	m.logf("ids compared pairwise up to %d (0: the default)", m.pairwiseAt)
	views := []map[string]any{{}} // views[j]: the direct follower's view after j batches
	matched := 0                  // the view the reader was last found at
	handed := 0
	if m.from {
		// The reader gets the initial listing directly; the queue
		// starts from the ids it then has.
		b := m.nextBatch(true)
		m.logf("initial, read directly: %s", fmtBatch(b))
		for _, f := range []*view.Follower{direct, through} {
			if err := f.Apply(b, func(flow.Event) error { return nil }); err != nil {
				return err
			}
		}
		views = append(views, snapshot(direct.Set()))
		matched, handed = 1, 1
		var ids []string // what the queue would have handed over
		for _, c := range b.Changes {
			if !c.Undecodable {
				ids = append(ids, c.ID)
			}
		}
		slices.Sort(ids)
		q = NewFrom(m.maxQueued, ids)
		q.rebaseAt, q.pairwiseAt = m.rebaseAt, m.pairwiseAt
	}
	empty, cancel := context.WithCancel(context.Background())
	cancel() // Next with a done context returns at once when nothing is queued

	// held is a change batch the reader applied and has not given back
	// yet (recycle), and what it held when the reader got it: nothing
	// may write over it until the reader gives it back.
	var held, heldWas []flow.Change
	giveBack := func() error {
		if held == nil {
			return nil
		}
		if !slices.Equal(held, heldWas) {
			return fmt.Errorf("a batch the reader holds was written over: %v, was %v", held, heldWas)
		}
		q.Recycle(held)
		held, heldWas = nil, nil
		return nil
	}

	// read takes one batch if there is one and checks the reader's view.
	read := func() (ok bool, err error) {
		b, err := q.Next(empty)
		if err != nil {
			return false, giveBack()
		}
		if err := giveBack(); err != nil {
			return true, err
		}
		if m.recycle && !b.Full() {
			held, heldWas = b.Changes, slices.Clone(b.Changes)
			if m.rng.IntN(2) == 0 {
				// Given back once applied, as a run's loop does.
				defer func() {
					if err == nil {
						err = giveBack()
					}
				}()
			}
		}
		handed++
		m.logf("  read %s", fmtBatch(b))
		seen := map[string]bool{}
		for _, c := range b.Changes {
			if seen[c.ID] {
				return true, fmt.Errorf("batch %d read holds %q twice", handed, c.ID)
			}
			seen[c.ID] = true
		}
		switch {
		case handed == 1 && b.Cause != flow.CauseInitial:
			return true, fmt.Errorf("the first batch read is %v, want initial", b.Cause)
		case handed > 1 && b.Cause == flow.CauseInitial:
			return true, fmt.Errorf("batch %d read is initial again", handed)
		}
		if err := through.Apply(b, func(flow.Event) error { return nil }); err != nil {
			return true, err
		}
		got := snapshot(through.Set())
		for j := matched; j < len(views); j++ {
			if m.sameView(views[j], got) {
				matched = j
				return true, nil
			}
		}
		return true, fmt.Errorf("after reading %d batches the reader's view %v is no view the source had since view %d; views since: %v",
			handed, got, matched, views[matched:])
	}

	for range steps {
		if len(views) > 1 && m.rng.Float64() < readP {
			if _, err := read(); err != nil {
				return err
			}
			continue
		}
		b := m.nextBatch(len(views) == 1)
		m.logf("put %d: %s", len(views), fmtBatch(b))
		if err := direct.Apply(b, func(flow.Event) error { return nil }); err != nil {
			return err
		}
		views = append(views, snapshot(direct.Set()))
		q.Put(b)
		// The source may make its next batch in the same slice (the
		// etcd watcher does, flow.Sink): a queue that kept it would
		// hand on what is written over it.
		for i := range b.Changes {
			b.Changes[i] = flow.Change{ID: "overwritten", Rev: -1}
		}
		// Bounded by ids: an unread full listing, one merged batch (at
		// most one change per id), and MaxQueued-1 batches as they came.
		batches, changes := q.queued()
		if batches > m.maxQueued+1 || changes > 2*len(m.ids)+3*m.maxQueued {
			return fmt.Errorf("%d batches with %d changes queued for %d ids", batches, changes, len(m.ids))
		}
	}
	for {
		ok, err := read()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
	}
	if want, got := views[len(views)-1], snapshot(through.Set()); !m.sameView(want, got) {
		return fmt.Errorf("the reader caught up at %v, want the source's %v", got, want)
	}
	return nil
}

// nextBatch returns a random batch; the first is the initial listing.
func (m *modelCase) nextBatch(first bool) flow.Batch {
	rng := m.rng
	if first || rng.IntN(8) == 0 {
		b := flow.Batch{Cause: flow.CauseResync, Synced: true}
		if first {
			b.Cause = flow.CauseInitial
		}
		next := map[string]int{}
		for _, id := range m.ids {
			switch rng.IntN(4) {
			case 0: // absent
			case 1:
				b.Changes = append(b.Changes, flow.Change{ID: id, Undecodable: true})
				if v, ok := m.source[id]; ok {
					next[id] = v
				}
			default:
				v := rng.IntN(60)
				b.Changes = append(b.Changes, flow.Change{ID: id, Object: v})
				next[id] = v
			}
		}
		rng.Shuffle(len(b.Changes), func(i, j int) { b.Changes[i], b.Changes[j] = b.Changes[j], b.Changes[i] })
		m.source = next
		return b
	}
	b := flow.Batch{Cause: flow.CauseChange, Synced: true}
	for range 1 + rng.IntN(3) {
		id := m.ids[rng.IntN(len(m.ids))]
		switch rng.IntN(4) {
		case 0:
			b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true})
			delete(m.source, id)
		case 1:
			b.Changes = append(b.Changes, flow.Change{ID: id, Undecodable: true})
		default:
			v := rng.IntN(60)
			b.Changes = append(b.Changes, flow.Change{ID: id, Object: v})
			m.source[id] = v
		}
	}
	return b
}

// sameView compares two views: the same ids, states equal by --equals.
func (m *modelCase) sameView(want, got map[string]any) bool {
	return maps.EqualFunc(want, got, func(a, b any) bool {
		if m.equals == nil {
			return a == b
		}
		eq, _ := m.equals("", a, b)
		return eq
	})
}

func (m *modelCase) logf(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf(format, args...))
}

func snapshot(s *view.Set) map[string]any {
	out := map[string]any{}
	s.Ascend(func(id string, obj any) bool {
		out[id] = obj
		return true
	})
	return out
}

func fmtBatch(b flow.Batch) string {
	s := b.Cause.String() + " {"
	for i, c := range b.Changes {
		if i > 0 {
			s += " "
		}
		switch {
		case c.Deleted:
			s += c.ID + ":deleted"
		case c.Undecodable:
			s += c.ID + ":bad"
		default:
			s += fmt.Sprintf("%s:%v", c.ID, c.Object)
		}
	}
	return s + "}"
}

func joinLines(lines []string) string {
	const keep = 60 // the end of a long trace is where it went wrong
	if len(lines) > keep {
		lines = append([]string{fmt.Sprintf("… %d lines before", len(lines)-keep)}, lines[len(lines)-keep:]...)
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
