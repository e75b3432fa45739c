package view

import (
	"github.com/nodewatch/nodewatch/internal/flow"

	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortByIDModel holds sortByID to a stable sort of the positions by
// strings.Compare, over random batches whose ids share beginnings of
// every length, end within or after the eight bytes compared as a
// number, hold zero bytes (which pad a shorter id's number, a tie) and
// bytes beyond ASCII, and repeat.
func TestSortByIDModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2311))
	alphabet := []byte{0, 1, 'a', 'b', 'z', 0x7f, 0x80, 0xff}
	var scratch []leading
	for n := range 20000 {
		long := strings.Repeat("/nodes/", 3)
		prefix := long[:rng.IntN(len(long))]
		var pool []string
		for range 1 + rng.IntN(12) {
			b := []byte(prefix)
			for range rng.IntN(12) {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			pool = append(pool, string(b))
		}
		cs := make([]flow.Change, 1+rng.IntN(60))
		for i := range cs {
			cs[i].ID = pool[rng.IntN(len(pool))]
		}
		order := make([]int32, len(cs))
		for i := range order {
			order[i] = int32(i)
		}
		want := slices.Clone(order)
		slices.SortStableFunc(want, func(a, b int32) int { return strings.Compare(cs[a].ID, cs[b].ID) })
		scratch = sortByID(cs, order, scratch)
		if !slices.Equal(order, want) {
			t.Fatalf("case %d: ids %q: got order %v, want %v", n, ids(cs), order, want)
		}
	}
}

func ids(cs []flow.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// TestSortByIDNumberAlone: ids that tie on the number (a shorter id
// padded with zeros, ids that differ past the eight bytes) order as the
// strings do, and a sort by the number alone would not order them so.
func TestSortByIDNumberAlone(t *testing.T) {
	cs := []flow.Change{{ID: "/n/abcdefgh2"}, {ID: "/n/abcdefgh1"}, {ID: "/n/b"}, {ID: "/n/a\x00"}, {ID: "/n/a"}}
	order := []int32{0, 1, 2, 3, 4}
	sortByID(cs, order, nil)
	want := []int32{4, 3, 1, 0, 2}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	// By the number alone, the ids tied on it keep their positions.
	byWord := []int32{0, 1, 2, 3, 4}
	slices.SortStableFunc(byWord, func(a, b int32) int { return cmp.Compare(wordAt(cs[a].ID, 3), wordAt(cs[b].ID, 3)) })
	if slices.Equal(byWord, want) {
		t.Fatal("the number alone orders these ids: the case does not test ties")
	}
}
