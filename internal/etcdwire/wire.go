// Package etcdwire reads etcd's Watch and Range responses in place, for
// the etcd watcher (internal/etcdkv).
//
// The watch stream is read with a codec of its own (Codec): a response
// is decoded in place, its events' keys and values pointing into one
// buffer that the stream keeps from one response to the next, instead of
// gRPC's codec materializing every response into a fresh buffer (a
// transaction of 50 values of 600 B is a 32 KiB allocation) and protobuf
// copying every key and value out of it into structs of their own. On
// transactions of 50 that was a sixth of nodewatch's CPU, and most of the
// bytes it allocated. A listing's pages (Range) are read the same way: a
// page is one buffer of its size, and its key-values point into it,
// instead of three allocations per key-value.
//
// It is a package of its own because the wire is a concern of its own,
// held to etcd's generated code by its own model tests and fuzz targets,
// and because its tests then link no etcd server: a fuzz worker copies
// the coverage counters of everything linked after every input, and
// FuzzWatchCodec's 200,000 inputs took 34 s here against 58 s inside
// etcdkv.
package etcdwire

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// WatchDesc and WatchMethod are etcd's Watch RPC, as the generated client
// opens it; RangeMethod is its Range.
var WatchDesc = &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true, ClientStreams: true}

const (
	WatchMethod = "/etcdserverpb.Watch/Watch"
	RangeMethod = "/etcdserverpb.KV/Range"
)

// Codec marshals requests as the generated code does and decodes
// responses in place, into a *WatchResponse or a *RangeResponse.
type Codec struct{}

func (Codec) Name() string { return "proto" }

func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(interface{ Marshal() ([]byte, error) })
	if !ok {
		return nil, fmt.Errorf("etcd wire: cannot marshal %T", v)
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// A receiver decodes a response in place. gRPC frees data when Unmarshal
// returns: what the response points to must be a copy.
type receiver interface {
	receive(data mem.BufferSlice) error
}

func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(receiver)
	if !ok {
		return fmt.Errorf("etcd wire: cannot unmarshal into %T", v)
	}
	return r.receive(data)
}

// receive copies data into the buffer the stream keeps, and decodes it.
// One large response must not pin its buffer for the stream's life.
func (r *WatchResponse) receive(data mem.BufferSlice) error {
	if cap(r.buf) > maxKeptBuffer && data.Len() <= maxKeptBuffer {
		r.buf = nil
	}
	r.buf = r.buf[:0]
	for _, b := range data {
		r.buf = append(r.buf, b.ReadOnlyData()...)
	}
	return r.decodeAny(r.buf)
}

// maxKeptBuffer is the largest buffer a stream keeps for the next
// response.
const maxKeptBuffer = 4 << 20

// WatchResponse is etcd's WatchResponse (etcdserverpb), as much of it as
// the watcher reads. Its events' keys and values point into buf: they are
// valid until the next response is received into it.
type WatchResponse struct {
	buf []byte

	HasHeader       bool
	Revision        int64 // the header's
	WatchID         int64
	Created         bool
	Canceled        bool
	CompactRevision int64
	CancelReason    string
	Fragment        bool
	Events          []WatchEvent
}

// A WatchEvent is etcd's mvccpb.Event without its previous key-value
// (the watcher never asks for it).
type WatchEvent struct {
	Type mvccpb.Event_EventType
	KV   mvccpb.KeyValue
}

// RangeResponse is etcd's RangeResponse, as much of it as a listing
// reads: one page. Its key-values point into buf, which is the page's
// own (the next page is read while this one is handled).
type RangeResponse struct {
	buf       []byte
	HasHeader bool
	Revision  int64 // the header's
	KVs       []mvccpb.KeyValue
	More      bool
	Count     int64
}

// receive copies data into a buffer of the page's own, and decodes it.
func (r *RangeResponse) receive(data mem.BufferSlice) error {
	r.buf = make([]byte, 0, data.Len())
	for _, b := range data {
		r.buf = append(r.buf, b.ReadOnlyData()...)
	}
	return r.decodeAny(r.buf)
}

var errWire = errors.New("etcd response: malformed protobuf")

// decode decodes the WatchResponse encoded in b into r, its events
// pointing into b. Fields appear as protobuf allows: in any order, a
// message field given twice is merged, a scalar given twice is the last;
// unknown fields are skipped.
func (r *WatchResponse) decode(b []byte) error {
	events := r.Events[:0]
	clear(r.Events[:cap(r.Events)]) // no key or value of an earlier response stays reachable
	*r = WatchResponse{buf: r.buf}
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
		var v uint64
		var m []byte
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			b, err = header(b, &r.HasHeader, &r.Revision)
		case num == 11 && typ == protowire.BytesType:
			if m, b, err = consumeBytes(b); err == nil {
				events = append(events, WatchEvent{})
				err = events[len(events)-1].decode(m)
			}
		case num == 6 && typ == protowire.BytesType:
			m, b, err = consumeBytes(b)
			r.CancelReason = string(m)
		case num >= 2 && num <= 7 && num != 6 && typ == protowire.VarintType:
			v, b, err = consumeVarint(b)
			switch num {
			case 2:
				r.WatchID = int64(v)
			case 3:
				r.Created = v != 0
			case 4:
				r.Canceled = v != 0
			case 5:
				r.CompactRevision = int64(v)
			case 7:
				r.Fragment = v != 0
			}
		case num >= 1 && num <= 7 || num == 11:
			return b, errWire // a known field of the wrong wire type
		default:
			b, err = skipField(b, num, typ)
		}
		return b, err
	})
	r.Events = events
	return err
}

// header reads the ResponseHeader field at b's start (a response's field
// 1): it notes that there is one, and merges its revision into rev.
func header(b []byte, has *bool, rev *int64) ([]byte, error) {
	m, b, err := consumeBytes(b)
	if err == nil {
		*has = true
		err = decodeHeader(m, rev)
	}
	return b, err
}

// decodeHeader decodes a ResponseHeader's revision (field 3) into rev,
// merging into what it holds.
func decodeHeader(b []byte, rev *int64) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
		switch {
		case num >= 1 && num <= 4 && typ == protowire.VarintType:
			v, b, err := consumeVarint(b)
			if num == 3 {
				*rev = int64(v)
			}
			return b, err
		case num >= 1 && num <= 4:
			return b, errWire
		}
		return skipField(b, num, typ)
	})
}

// decode decodes the RangeResponse encoded in b into r, its key-values
// pointing into b; fields as WatchResponse.decode reads them.
func (r *RangeResponse) decode(b []byte) error {
	*r = RangeResponse{buf: r.buf}
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
		var v uint64
		var m []byte
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			b, err = header(b, &r.HasHeader, &r.Revision)
		case num == 2 && typ == protowire.BytesType:
			if m, b, err = consumeBytes(b); err == nil {
				r.KVs = append(r.KVs, mvccpb.KeyValue{})
				err = decodeKeyValue(&r.KVs[len(r.KVs)-1], m)
			}
		case (num == 3 || num == 4) && typ == protowire.VarintType:
			v, b, err = consumeVarint(b)
			if num == 3 {
				r.More = v != 0
			} else {
				r.Count = int64(v)
			}
		case num >= 1 && num <= 4:
			return b, errWire // a known field of the wrong wire type
		default:
			b, err = skipField(b, num, typ)
		}
		return b, err
	})
}

// decode decodes an mvccpb.Event into e, merging into what e holds.
func (e *WatchEvent) decode(b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
		var m []byte
		var err error
		switch {
		case num == 1 && typ == protowire.VarintType:
			var v uint64
			v, b, err = consumeVarint(b)
			e.Type = mvccpb.Event_EventType(int32(v))
		case num == 2 && typ == protowire.BytesType:
			if m, b, err = consumeBytes(b); err == nil {
				err = decodeKeyValue(&e.KV, m)
			}
		case num == 3 && typ == protowire.BytesType:
			// prev_kv: never asked for, but checked as the generated
			// code would.
			if m, b, err = consumeBytes(b); err == nil {
				err = decodeKeyValue(&mvccpb.KeyValue{}, m)
			}
		case num >= 1 && num <= 3:
			return b, errWire
		default:
			b, err = skipField(b, num, typ)
		}
		return b, err
	})
}

// decodeKeyValue decodes an mvccpb.KeyValue into kv, its key and value
// pointing into b.
func decodeKeyValue(kv *mvccpb.KeyValue, b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
		switch {
		case (num == 1 || num == 5) && typ == protowire.BytesType:
			v, b, err := consumeBytes(b)
			if v == nil {
				v = []byte{}
			}
			if num == 1 {
				kv.Key = v
			} else {
				kv.Value = v
			}
			return b, err
		case num >= 2 && num <= 6 && num != 5 && typ == protowire.VarintType:
			v, b, err := consumeVarint(b)
			switch num {
			case 2:
				kv.CreateRevision = int64(v)
			case 3:
				kv.ModRevision = int64(v)
			case 4:
				kv.Version = int64(v)
			case 6:
				kv.Lease = int64(v)
			}
			return b, err
		case num >= 1 && num <= 6:
			return b, errWire
		}
		return skipField(b, num, typ)
	})
}

// fields calls fn with each field of the message encoded in b: its
// number, its wire type and what follows its tag; fn returns what follows
// the field.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, rest []byte) ([]byte, error)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			if tag, n := protowire.ConsumeVarint(b); n > 0 && tag>>3 > uint64(protowire.MaxValidNumber) {
				return errFieldNumber
			}
			return errWire
		}
		var err error
		if b, err = fn(num, typ, b[n:]); err != nil {
			return err
		}
	}
	return nil
}

func consumeVarint(b []byte) (uint64, []byte, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, b, errWire
	}
	return v, b[n:], nil
}

// consumeBytes returns the length-delimited field at b's start, capped so
// that appending to it cannot overwrite what follows.
func consumeBytes(b []byte) ([]byte, []byte, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, b, errWire
	}
	return v[:len(v):len(v)], b[n:], nil
}

// errFieldNumber is a field number above protobuf's largest (2^29-1),
// which the generated code takes (cut to 32 bits) and protowire does not.
var errFieldNumber = fmt.Errorf("%w: a field number out of range", errWire)

// errGroup is a malformed group (deprecated in protobuf, never sent by
// etcd), which the generated code skips more loosely than protowire.
var errGroup = fmt.Errorf("%w: a group", errWire)

func skipField(b []byte, num protowire.Number, typ protowire.Type) ([]byte, error) {
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 && (typ == protowire.StartGroupType || typ == protowire.EndGroupType) {
		return b, errGroup
	}
	if n < 0 {
		return b, errWire
	}
	return b[n:], nil
}
