package state

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// A batch is in flight from just before any of it is delivered (its
// first line written out, or its handler started) until it is recorded.
// A run killed meanwhile cannot know how much of it its consumer took:
// the recorded view says what the consumer surely had, the batch what it
// may have. So the batch's ids are written down first (MarkInFlight, in
// the inflight bucket, one transaction), and Record clears those it
// records, in the transaction that records them. A run that finds ids in
// flight (InFlight) delivers each of them again in its first batch, with
// its state then, even where that equals the recorded view: a change
// reverted while nothing ran is not lost.
//
// An entry is the event's type (one byte: 'n', 'u' or 'd') followed by
// the JSON of the state the consumer was given: the object of a new or
// an updated, the prev of a deleted (empty when it had none). Files made
// before the bucket existed get it on their first mark.

var inflightBucket = []byte("inflight")

// MarkInFlight records that events (new, updated, deleted) are about to
// be delivered, adding to what is in flight already (a batch given to a
// handler again, merged with more, or a resumed run's first batch). Their
// objects must be *jsondoc.Doc.
func (s *Store) MarkInFlight(events []flow.Event) error {
	if len(events) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(inflightBucket)
		if err != nil {
			return err
		}
		for _, ev := range events {
			o := ev.Object
			if ev.Type == flow.Deleted {
				o = ev.Prev
			}
			// bbolt keeps v until the commit: one for each entry.
			v := []byte{typeByte[ev.Type]}
			if o != nil {
				d, ok := o.(*jsondoc.Doc)
				if !ok {
					return fmt.Errorf("%q: object of type %T", ev.ID, o)
				}
				v = append(v, d.JSON()...)
			}
			if err := b.Put([]byte(ev.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--state %s: noting the batch in flight: %w", s.path, err)
	}
	s.inflight = true
	return nil
}

var typeByte = map[flow.EventType]byte{flow.New: 'n', flow.Updated: 'u', flow.Deleted: 'd'}

// InFlight returns what an earlier run noted in flight and did not
// record, in id order: events as they were given (Object for new and
// updated, Prev, if known, for deleted), Rev the recorded one. An entry
// that cannot be read makes it an ErrBad error.
func (s *Store) InFlight() ([]flow.Event, error) {
	var evs []flow.Event
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(inflightBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			ev := flow.Event{ID: string(k), Rev: s.rev}
			if len(v) > 0 {
				switch v[0] {
				case 'n':
					ev.Type = flow.New
				case 'u':
					ev.Type = flow.Updated
				case 'd':
					ev.Type = flow.Deleted
				}
			}
			j := v[min(len(v), 1):]
			switch {
			case ev.Type == 0, ev.Type != flow.Deleted && len(j) == 0, len(j) > 0 && !json.Valid(j):
				return s.bad("the entry in flight of %q is not a type and JSON", k)
			case len(j) == 0:
			case ev.Type == flow.Deleted:
				ev.Prev = jsondoc.New(bytes.Clone(j))
			default:
				ev.Object = jsondoc.New(bytes.Clone(j))
			}
			evs = append(evs, ev)
			return nil
		})
	})
	s.inflight = len(evs) > 0
	return evs, err
}

// clearInFlight, in Record's transaction, forgets that the ids of events
// (recorded now) are in flight. An id in flight that the batch did not
// record stays so (a batch cut short by --count, an id whose state the
// source could not decode): the next run that resumes delivers it again.
func (s *Store) clearInFlight(tx *bolt.Tx, events []flow.Event) error {
	b := tx.Bucket(inflightBucket)
	if !s.inflight || b == nil {
		return nil
	}
	for _, ev := range events {
		if err := b.Delete([]byte(ev.ID)); err != nil {
			return err
		}
	}
	k, _ := b.Cursor().First()
	s.inflight = k != nil
	return nil
}
