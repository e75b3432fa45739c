package view

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSetModel holds Set to a map and a sort over random runs of puts
// (new ids and updates), deletes, lookups and walks (whole, or stopped
// early), at sizes on both sides of the point where pending inserts and
// deletes are merged without a walk; a third of the runs walk only at the
// end, so that the pending ones must be merged as they pile up.
func TestSetModel(t *testing.T) {
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 7))
		s, model := NewSet(), map[string]int{}
		ids := 1 + r.IntN(400)
		walks := seed%3 != 0 // else one walk, at the end: inserts and deletes pile up
		for op := range 3000 {
			id := fmt.Sprintf("id-%03d", r.IntN(ids))
			k := r.IntN(10)
			switch {
			case op == 2999:
				k = 9
			case !walks && k == 9:
				k = 0
			}
			switch {
			case k < 4:
				s.Put(id, op)
				model[id] = op
			case k < 7:
				s.Delete(id)
				delete(model, id)
			case k < 9:
				got, ok := s.Get(id)
				if want, had := model[id]; ok != had || ok && got != want {
					t.Fatalf("seed %d op %d: Get(%s) = %v, %v; want %v, %v", seed, op, id, got, ok, want, had)
				}
			default:
				want := slices.Sorted(func(yield func(string) bool) {
					for id := range model {
						if !yield(id) {
							return
						}
					}
				})
				stop := len(want) + 1
				if r.IntN(3) == 0 {
					stop = r.IntN(len(want) + 1)
				}
				var got []string
				s.Ascend(func(id string, obj any) bool {
					if obj != model[id] {
						t.Fatalf("seed %d op %d: Ascend gives %s = %v, want %v", seed, op, id, obj, model[id])
					}
					got = append(got, id)
					return len(got) < stop
				})
				if stop < len(want) {
					want = want[:max(stop, 1)]
				}
				if !slices.Equal(got, want) && !(len(want) == 0 && len(got) == 0) {
					t.Fatalf("seed %d op %d: Ascend = %v, want %v", seed, op, got, want)
				}
			}
			if s.Len() != len(model) {
				t.Fatalf("seed %d op %d: Len = %d, want %d", seed, op, s.Len(), len(model))
			}
			if pending := len(s.added) + s.gone; pending > 64 && pending > s.Len()/2 {
				t.Fatalf("seed %d op %d: %d inserts and deletes pending over %d entries", seed, op, pending, s.Len())
			}
		}
	}
}

// TestSetGivesBackMemory: a set that grew and shrank again holds no
// arrays sized for what it was, once a walk has merged what is pending.
func TestSetGivesBackMemory(t *testing.T) {
	s := NewSet()
	for i := range 100_000 {
		s.Put(fmt.Sprintf("id-%06d", i), i)
	}
	s.Ascend(func(string, any) bool { return true })
	for i := range 100_000 {
		s.Delete(fmt.Sprintf("id-%06d", i))
	}
	s.Put("last", 0)
	s.Ascend(func(string, any) bool { return true })
	if cap(s.order) > 2*s.Len()+1024 || cap(s.added) > s.Len()+1024 {
		t.Fatalf("a set of %d holds arrays of %d (order) and %d (added)", s.Len(), cap(s.order), cap(s.added))
	}
}
