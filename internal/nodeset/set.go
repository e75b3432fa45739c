package nodeset

import "github.com/google/btree"

// entry is one object the follower has printed.
type entry struct {
	id  string
	obj any
}

func lessEntry(a, b *entry) bool { return a.id < b.id }

// Set is a set of objects ordered by id (byte-wise, as etcd orders keys).
// Lookups cost O(1), inserts and deletes O(log n). The zero value is not
// usable; call NewSet. A Set is not safe for concurrent use.
type Set struct {
	tree *btree.BTreeG[*entry]
	// byID finds an entry without walking the tree: the follower looks
	// up every change's id, and most changes update an object in place.
	byID map[string]*entry
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{tree: btree.NewG(32, lessEntry), byID: map[string]*entry{}}
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
	s.tree.ReplaceOrInsert(e)
}

// Delete removes id from the set; it is a no-op if id is absent.
func (s *Set) Delete(id string) {
	e, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	s.tree.Delete(e)
}

// Ascend calls fn for every object in ascending id order until fn returns
// false.
func (s *Set) Ascend(fn func(id string, obj any) bool) {
	s.tree.Ascend(func(e *entry) bool { return fn(e.id, e.obj) })
}
