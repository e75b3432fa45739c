package view

import (
	"slices"
	"strings"
)

// entry is one object the follower has printed.
type entry struct {
	id   string
	obj  any
	gone bool // deleted since the Set last put its entries in order
}

func byEntryID(a, b *entry) int { return strings.Compare(a.id, b.id) }

// Set is a set of objects ordered by id (byte-wise, as etcd orders keys).
// The zero value is not usable; call NewSet. A Set is not safe for
// concurrent use.
//
// Lookups, updates, inserts and deletes cost O(1): the follower meets
// every change's id, and a filter makes an id come and go whenever its
// object stops or starts matching. Order is needed far less often (a
// full batch, --until and --each, serve's backlog), so it is made when
// asked for: Ascend sorts what was inserted since the last time and merges
// it in, O(n + k log k) for k inserts. So that the pending inserts and
// deletes hold no memory without bound when nothing asks, they are merged
// in once they outnumber half the set (O(log n) a change, amortised).
type Set struct {
	byID map[string]*entry
	// order is the entries in id order as of the last merge, some of
	// them gone since; added is the entries inserted since, in no order
	// (some gone too). gone counts the gone entries in both.
	order, added []*entry
	gone         int
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{byID: map[string]*entry{}}
}

// Len returns the number of objects in the set.
func (s *Set) Len() int { return len(s.byID) }

// Get returns the object stored under id and whether there is one.
func (s *Set) Get(id string) (any, bool) {
	e, ok := s.lookup(id)
	if !ok {
		return nil, false
	}
	return e.obj, true
}

// lookup returns the entry of id, and whether there is one: a caller
// that updates the object replaces it in the entry, with no second lookup.
func (s *Set) lookup(id string) (*entry, bool) {
	e, ok := s.byID[id]
	return e, ok
}

// Put stores obj under id, replacing any earlier object.
func (s *Set) Put(id string, obj any) {
	if e, ok := s.byID[id]; ok {
		e.obj = obj
		return
	}
	e := &entry{id: id, obj: obj}
	s.byID[id] = e
	s.added = append(s.added, e)
	s.settle()
}

// Delete removes id from the set; it is a no-op if id is absent.
func (s *Set) Delete(id string) {
	e, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	e.gone, e.obj = true, nil
	s.gone++
	s.settle()
}

// settle merges the pending inserts and deletes once they outnumber half
// the set.
func (s *Set) settle() {
	if pending := len(s.added) + s.gone; pending > 64 && pending > len(s.byID)/2 {
		s.merge()
	}
}

// Ascend calls fn for every object in ascending id order until fn returns
// false. fn must not modify the set. Ascend merges what is pending (see
// Set), so it is a write, as Put and Delete are.
func (s *Set) Ascend(fn func(id string, obj any) bool) {
	s.merge()
	for _, e := range s.order {
		if !fn(e.id, e.obj) {
			return
		}
	}
}

// merge puts the entries in order: those of order that are not gone,
// and those added, sorted, merged in.
func (s *Set) merge() {
	if len(s.added) == 0 && s.gone == 0 {
		return
	}
	added := slices.DeleteFunc(s.added, func(e *entry) bool { return e.gone })
	slices.SortFunc(added, byEntryID)
	kept := slices.DeleteFunc(s.order, func(e *entry) bool { return e.gone })
	// Merged from the back, into order's array grown to hold both.
	n := len(kept) + len(added)
	out := slices.Grow(kept, len(added))[:n]
	i, j := len(kept)-1, len(added)-1
	for k := n - 1; j >= 0; k-- {
		if i >= 0 && out[i].id > added[j].id {
			out[k] = out[i]
			i--
		} else {
			out[k] = added[j]
			j--
		}
	}
	clear(s.added) // DeleteFunc cleared what it dropped; this, the rest
	s.order, s.added, s.gone = out, s.added[:0], 0
	// Memory a set that shrank no longer needs goes back.
	if cap(s.order) > 2*len(s.order)+1024 {
		s.order = slices.Clip(slices.Clone(s.order))
	}
	if cap(s.added) > len(s.order)+1024 {
		s.added = nil
	}
}
