package handoff

import (
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// pairwiseUpTo is the most changes whose ids distinct compares pair by
// pair; above it, it finds them by their hashes in a table: one of
// seenTables for up to maxPooled of them, else a set of their own.
const (
	pairwiseUpTo = 16
	maxPooled    = 256
)

// seenTables are the tables distinct finds ids in, kept from one call to
// the next and shared by every queue (serve has one per stream): an
// entry is the high bits of an id's hash and its position (+1) in the
// batch, 0 if empty. A Go map of the ids cost a change four times as
// much, and the hand-off a twentieth of nodewatch's CPU while it
// followed transactions of 50 records of 200 B.
var seenTables = sync.Pool{New: func() any { return new([2 * maxPooled]uint64) }}

// seenSeed seeds the hashes of seenTables.
var seenSeed = maphash.MakeSeed()

// posBits are the low bits of a seenTables entry that hold a position.
const posBits = 9 // 1..maxPooled

// distinct reports whether cs holds each id once; q.mu must be held.
func (q *Queue) distinct(cs []flow.Change) bool {
	upTo := pairwiseUpTo
	if q.pairwiseAt > 0 {
		upTo = q.pairwiseAt
	}
	switch {
	case len(cs) <= upTo:
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				if cs[i].ID == cs[j].ID {
					return false
				}
			}
		}
		return true
	case len(cs) > maxPooled:
		seen := make(map[string]struct{}, len(cs))
		for _, c := range cs {
			if _, dup := seen[c.ID]; dup {
				return false
			}
			seen[c.ID] = struct{}{}
		}
		return true
	}
	// Open addressing in a table at most half full: 2n slots and up,
	// a power of two.
	t := seenTables.Get().(*[2 * maxPooled]uint64)
	size := 2 << bits.Len(uint(len(cs)-1))
	table := t[:size]
	defer func() {
		clear(table)
		seenTables.Put(t)
	}()
	const posMask = 1<<posBits - 1
	mask := uint64(size - 1)
	for i := range cs {
		h := maphash.String(seenSeed, cs[i].ID)
		for k := h; ; k++ {
			e := &table[k&mask]
			if *e == 0 {
				*e = h&^posMask | uint64(i+1)
				break
			}
			if *e&^posMask == h&^posMask && cs[*e&posMask-1].ID == cs[i].ID {
				return false
			}
		}
	}
	return true
}
