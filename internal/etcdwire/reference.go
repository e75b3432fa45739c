package etcdwire

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/fast"
)

// The reference: with the EtcdWire fast path off (package fast), a
// response is decoded by etcd's generated code, which copies every key
// and value out of it, and then given the shape the watcher reads. The
// model tests hold decode to it on random responses.

// decodeAny decodes b into r the fast way, or by the reference when the
// fast path is off.
func (r *WatchResponse) decodeAny(b []byte) error {
	if fast.On(fast.EtcdWire) {
		return r.decode(b)
	}
	var g pb.WatchResponse
	hasHeader, rev, err := reference(&g, b)
	if err != nil {
		return err
	}
	events := r.Events[:0]
	clear(r.Events[:cap(r.Events)])
	*r = WatchResponse{
		buf: r.buf, HasHeader: hasHeader, Revision: rev, WatchID: g.WatchId, Created: g.Created,
		Canceled: g.Canceled, CompactRevision: g.CompactRevision, CancelReason: g.CancelReason, Fragment: g.Fragment,
	}
	for _, ev := range g.Events {
		e := WatchEvent{Type: ev.Type}
		if ev.Kv != nil {
			e.KV = plainKV(ev.Kv)
		}
		events = append(events, e)
	}
	r.Events = events
	return nil
}

// decodeAny is WatchResponse.decodeAny for a page of a listing.
func (r *RangeResponse) decodeAny(b []byte) error {
	if fast.On(fast.EtcdWire) {
		return r.decode(b)
	}
	var g pb.RangeResponse
	hasHeader, rev, err := reference(&g, b)
	if err != nil {
		return err
	}
	*r = RangeResponse{buf: r.buf, HasHeader: hasHeader, Revision: rev, More: g.More, Count: g.Count}
	for _, kv := range g.Kvs {
		r.KVs = append(r.KVs, plainKV(kv))
	}
	return nil
}

// reference decodes b into g, a response of etcd's generated code, and
// returns what the fast path reads of its header (field 1): whether there
// is one, and its revision. Its error is the fast path's.
func reference(g interface {
	Unmarshal(b []byte) error
	GetHeader() *pb.ResponseHeader
}, b []byte) (hasHeader bool, rev int64, err error) {
	if err := g.Unmarshal(b); err != nil {
		return false, 0, fmt.Errorf("%w: %v", errWire, err)
	}
	h := g.GetHeader()
	return h != nil, h.GetRevision(), nil
}

// plainKV is kv's fields, without the generated code's bookkeeping.
func plainKV(kv *mvccpb.KeyValue) mvccpb.KeyValue {
	return mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
}
