package etcdkv

import (
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// change turns a key-value into a Change. A record that cannot be decoded
// is logged and becomes an Undecodable change, so that the follower keeps
// what it printed for it (also through a resync) instead of calling it
// deleted. During Run, the key's id comes from w.keys; with DecodeFrom,
// the value of a watch event (event) of fromMin bytes or more is decoded
// from the key's object of its last such event, and kept as the next
// one's. An object left by a value that has since shrunk stays: any
// reference decodes the same. An event's object that Keeps turns down is
// let go of at once, and the change handed on as a deletion, or, when the
// key's last change was turned down too, not at all (false): the reader
// does not have the key, and the deletion would tell it nothing. One it
// keeps is handed on as Kept.
func (w *Watcher) change(kv *mvccpb.KeyValue, deleted, event bool, keeps func(any) (bool, bool)) (flow.Change, bool) {
	ks := w.keyState(kv.Key)
	out := ks.out
	ks.out = false
	c := flow.Change{ID: ks.id, Deleted: deleted, Rev: kv.ModRevision}
	if deleted {
		ks.keep(nil)
		delete(w.keys, string(kv.Key))
		return c, true
	}
	if w.Decode == nil {
		// kv's bytes may be the watch stream's (see Decode).
		kv := *kv
		kv.Key, kv.Value = slices.Clone(kv.Key), slices.Clone(kv.Value)
		c.Object = &kv
		return c, true
	}
	large := event && w.DecodeFrom != nil && len(kv.Value) >= fromMin
	var obj any
	var err error
	if large && ks.last != nil {
		obj, err = w.DecodeFrom(kv, ks.last)
	} else {
		obj, err = w.Decode(kv)
	}
	if err != nil {
		w.Logf.Printf("skipping %q at rev %d: %v", kv.Key, kv.ModRevision, err)
		ks.keep(nil)
		c.Undecodable = true
		return c, true
	}
	if large { // an event: Run's, which keeps ks
		ks.keep(obj)
	} else if d, ok := obj.(*jsondoc.Doc); ok {
		d.Give() // nothing here keeps it
	}
	if keeps != nil {
		keep, decided := keeps(obj)
		if decided && !keep {
			jsondoc.Free(obj) // the hold it would have been handed on with
			c.Deleted, ks.out = true, true
			return c, !out
		}
		c.Kept = decided
	}
	c.Object = obj
	return c, true
}

// A keyState is what Run keeps of a key in the view (Watcher.keys).
type keyState struct {
	// id is the id of every change to the key, made once: the maps a
	// change meets on its way (the hand-off's, the view's) find the same
	// string by its pointer, without reading its bytes again.
	id string
	// last is, with DecodeFrom, the key's object of its last watch
	// event of fromMin bytes or more.
	last any
	// out: the key's last change was handed on as one the reader's
	// filter turns down (a deletion), so the reader does not have it.
	// Following 1,000 node records with a filter that keeps the UP ones,
	// while the others get heartbeats, new addresses and puts of the
	// same bytes (make bench-compare's live load), two fifths of the
	// changes are to records that the filter turned down before and turns
	// down again: handed on, each cost the hand-off and the view a lookup
	// of its id.
	out bool
}

// keep makes obj the key's last object (nil: none), shared with the
// view (jsondoc.Doc.Share), and lets go of the one before: whichever of
// the watcher and the view lets go of an object last frees it, for the
// next to be made from.
func (ks *keyState) keep(obj any) {
	if d, ok := obj.(*jsondoc.Doc); ok {
		if last, _ := ks.last.(*jsondoc.Doc); d == last {
			return // not DecodeFrom's (see there), but never a Doc freed as it is handed on
		}
		d.Share()
	}
	jsondoc.Free(ks.last)
	ks.last = obj
}

// keyState returns key's state in w.keys, made if it is new; outside
// Run, a state of its own that nothing keeps.
func (w *Watcher) keyState(key []byte) *keyState {
	if ks, ok := w.keys[string(key)]; ok {
		return ks
	}
	k := string(key)
	ks := &keyState{id: k}
	if w.ID != nil {
		ks.id = w.ID(k)
	}
	if w.keys != nil {
		w.keys[k] = ks
	}
	return ks
}

// fromMin is the smallest value DecodeFrom is used for. Below it, keeping
// and finding the last state costs more than reading the value again: in
// transactions of 50 changes, records of 200 B and 600 B took 5–10% more
// CPU with every value decoded from its last state, records of 4 KiB 11%
// less (nodewatch's CPU per change, following 1,000 keys with a filter,
// measured with make bench-compare).
const fromMin = 1 << 10
