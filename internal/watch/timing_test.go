package watch

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// at is a moment of a made-up timeline, ms after its start.
func at(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }

// msOf is the inverse of at.
func msOf(t time.Time) int { return int(t.Sub(at(0)) / time.Millisecond) }

// TestSettleModel: over random timelines of changes, the settler
// delivers, as execLoop drives it (a change at t is applied, then a
// delivery is due unless it waits; otherwise the next moment is the
// earlier of the next change and due), exactly when a model that looks
// at every millisecond does: pending changes are delivered at the first
// moment at which none came for Min, or Max passed since the first.
func TestSettleModel(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		min := 1 + rng.IntN(50)
		max := min + rng.IntN(4*min)
		var changes []int
		for now := rng.IntN(20); len(changes) < 1+rng.IntN(40); now += rng.IntN(2 * min) {
			changes = append(changes, now)
		}
		s := settler{Settle: Settle{Min: time.Duration(min) * time.Millisecond, Max: time.Duration(max) * time.Millisecond}}
		var got []int
		for i := 0; i < len(changes) || !s.due().IsZero(); {
			due := s.due()
			if i == len(changes) || (!due.IsZero() && msOf(due) < changes[i]) {
				got = append(got, msOf(due))
				s.delivered()
				continue
			}
			now := changes[i]
			for ; i < len(changes) && changes[i] == now; i++ {
				s.changed(at(now))
			}
			if !s.waits(at(now)) {
				got = append(got, now)
				s.delivered()
			}
		}
		var want []int
		first, last := -1, -1
		next := 0
		for now := 0; next < len(changes) || first >= 0; now++ {
			for ; next < len(changes) && changes[next] == now; next++ {
				if first < 0 {
					first = now
				}
				last = now
			}
			if first >= 0 && (now-last >= min || now-first >= max) {
				want = append(want, now)
				first, last = -1, -1
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d, --settle %dms:%dms, changes at %v:\ndelivered at %v\nwant        %v", seed, min, max, changes, got, want)
		}
	}
}

// TestSettleBurstAndStream: the two cases the option is for, spelled
// out: a burst gives one delivery MIN after its last change, and a
// stream that never goes quiet is delivered every MAX.
func TestSettleBurstAndStream(t *testing.T) {
	s := settler{Settle: Settle{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}}
	for ms := 0; ms < 50; ms += 5 {
		s.changed(at(ms))
		if !s.waits(at(ms)) {
			t.Fatalf("a burst delivered at %dms", ms)
		}
	}
	if got := msOf(s.due()); got != 145 {
		t.Errorf("burst delivered at %dms, want 145 (MIN after its last change)", got)
	}
	s.delivered()
	var deliveries []int
	for ms := 1000; ms < 3000; ms += 50 {
		if d := s.due(); !d.IsZero() && msOf(d) <= ms {
			deliveries = append(deliveries, msOf(d))
			s.delivered()
		}
		s.changed(at(ms))
	}
	if want := []int{1400, 1800, 2200, 2600}; !slices.Equal(deliveries, want) {
		t.Errorf("stream delivered at %v, want %v (every MAX after its first undelivered change)", deliveries, want)
	}
}

// TestStableModel: over random timelines of a goal met or not after
// each batch, a run with Stable ends, as the loops drive stability (the
// moment it is due comes before a batch at or after it), exactly when a
// model says: DUR after the start of the first stretch in which the goal
// held without a break for DUR (or the last, open one).
func TestStableModel(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 11))
		dur := 1 + rng.IntN(100)
		type obs struct {
			ms  int
			met bool
		}
		var timeline []obs
		for now := rng.IntN(20); len(timeline) < 1+rng.IntN(30); now += 1 + rng.IntN(dur) {
			timeline = append(timeline, obs{now, rng.IntN(3) > 0})
		}
		s := stability{dur: time.Duration(dur) * time.Millisecond}
		got := -1
		for _, o := range timeline {
			if d := s.due(); !d.IsZero() && msOf(d) <= o.ms {
				got = msOf(d)
				break
			}
			if s.observe(at(o.ms), o.met) {
				t.Fatalf("seed %d: ended at a batch (%dms), not at the moment due", seed, o.ms)
			}
		}
		if d := s.due(); got < 0 && !d.IsZero() {
			got = msOf(d)
		}
		want := -1
		start := -1
		for _, o := range timeline {
			switch {
			case o.met && start < 0:
				start = o.ms
			case !o.met && start >= 0 && o.ms-start >= dur:
				want = start + dur
			case !o.met:
				start = -1
			}
			if want >= 0 {
				break
			}
		}
		if want < 0 && start >= 0 {
			want = start + dur
		}
		if got != want {
			t.Fatalf("seed %d, --stable %dms, timeline %v: ended at %d, want %d", seed, dur, timeline, got, want)
		}
	}
}

// TestStableHeldFor: what the report says of a goal that held.
func TestStableHeldFor(t *testing.T) {
	s := stability{dur: time.Second}
	if d, holding := s.heldFor(at(0)); d != 0 || holding {
		t.Errorf("never held: %v %v", d, holding)
	}
	s.observe(at(100), true)
	s.observe(at(300), true)
	if d, holding := s.heldFor(at(400)); d != 300*time.Millisecond || !holding {
		t.Errorf("holding: %v %v, want 300ms true", d, holding)
	}
	s.observe(at(700), false)
	if d, holding := s.heldFor(at(900)); d != 600*time.Millisecond || holding {
		t.Errorf("broken: %v %v, want 600ms false", d, holding)
	}
}
