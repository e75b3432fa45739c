package nodeset

import "github.com/google/btree"

// entry is one object the follower has printed.
type entry struct {
	id  string
	obj any
}

func lessEntry(a, b *entry) bool { return a.id < b.id }

// Set is a set of objects ordered by id (byte-wise, as etcd orders keys).
// Lookups, inserts and deletes cost O(log n). The zero value is not usable;
// call NewSet. A Set is not safe for concurrent use.
type Set struct {
	tree *btree.BTreeG[*entry]
	// last is the entry the last Get found: the follower looks an id up,
	// then puts its new object, which replaces last's in place instead
	// of walking the tree a second time.
	last  *entry
	probe entry // the key of a lookup (a pointer to it does not allocate)
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{tree: btree.NewG(32, lessEntry)}
}

// Len returns the number of objects in the set.
func (s *Set) Len() int { return s.tree.Len() }

// Get returns the object stored under id and whether there is one.
func (s *Set) Get(id string) (any, bool) {
	e, ok := s.tree.Get(s.key(id))
	if !ok {
		return nil, false
	}
	s.last = e
	return e.obj, true
}

// Put stores obj under id, replacing any earlier object.
func (s *Set) Put(id string, obj any) {
	if s.last != nil && s.last.id == id {
		s.last.obj = obj
		return
	}
	s.tree.ReplaceOrInsert(&entry{id: id, obj: obj})
}

// key returns the probe for a lookup of id.
func (s *Set) key(id string) *entry {
	s.probe = entry{id: id}
	return &s.probe
}

// Delete removes id from the set; it is a no-op if id is absent.
func (s *Set) Delete(id string) {
	if s.last != nil && s.last.id == id {
		s.last = nil
	}
	s.tree.Delete(s.key(id))
}

// Ascend calls fn for every object in ascending id order until fn returns
// false.
func (s *Set) Ascend(fn func(id string, obj any) bool) {
	s.tree.Ascend(func(e *entry) bool { return fn(e.id, e.obj) })
}
