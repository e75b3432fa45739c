package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// wireEvent is a WatchEvent as received, its nodes left in their binary
// encoding: the converter writes each node's object straight from it
// (curator.ObjectOfWire), on as many goroutines as there are Ps, instead
// of the stream's one goroutine unmarshalling every node first, which
// cost more than writing the objects.
//
// Nodes are checked only when converted: a node that does not unmarshal
// fails its conversion (curator.ErrNodeWire), where it failed the event's
// Recv before, and the stream ends either way.
type wireEvent struct {
	nodes      [][]byte // each a Node message; they share one buffer
	progress   apipb.WatchEvent_Progress
	tombstones []*apipb.NodeTombstone
}

// unmarshal reads the WatchEvent b, which it keeps. Anything but the
// fields of a WatchEvent, each of its wire type (unknown fields, say), is
// left to proto.Unmarshal, whose error is the event's.
func (ev *wireEvent) unmarshal(b []byte) error {
	*ev = wireEvent{}
	for w := b; len(w) > 0; {
		num, typ, n := protowire.ConsumeTag(w)
		if n < 0 {
			return ev.unmarshalSlow(b)
		}
		w = w[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			var node []byte
			if node, n = protowire.ConsumeBytes(w); n >= 0 {
				ev.nodes = append(ev.nodes, node)
			}
		case num == 2 && typ == protowire.VarintType:
			var v uint64
			if v, n = protowire.ConsumeVarint(w); n >= 0 {
				ev.progress = apipb.WatchEvent_Progress(int32(v))
			}
		case num == 3 && typ == protowire.BytesType:
			var t []byte
			if t, n = protowire.ConsumeBytes(w); n >= 0 {
				ts := &apipb.NodeTombstone{}
				if proto.Unmarshal(t, ts) != nil {
					return ev.unmarshalSlow(b)
				}
				ev.tombstones = append(ev.tombstones, ts)
			}
		default:
			n = -1
		}
		if n < 0 {
			return ev.unmarshalSlow(b)
		}
		w = w[n:]
	}
	return nil
}

// unmarshalSlow reads the WatchEvent b with proto.Unmarshal.
func (ev *wireEvent) unmarshalSlow(b []byte) error {
	full := &apipb.WatchEvent{}
	if err := proto.Unmarshal(b, full); err != nil {
		return err
	}
	*ev = wireEvent{progress: full.Progress, tombstones: full.NodeTombstones}
	for _, n := range full.Nodes {
		node, err := proto.Marshal(n)
		if err != nil {
			return err
		}
		ev.nodes = append(ev.nodes, node)
	}
	return nil
}

// watchCodec is the proto codec, except that it reads a *wireEvent
// itself. Its name is the proto codec's, so that the content-subtype it
// sends is "proto".
type watchCodec struct{}

func (watchCodec) Name() string { return "proto" }

func (watchCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (watchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if ev, ok := v.(*wireEvent); ok {
		return ev.unmarshal(data.Materialize()) // a copy: data is freed on return
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// watchStream is a Curator Watch stream whose events are wireEvents.
type watchStream = grpc.ServerStreamingClient[wireEvent]

// watchWire calls Curator.Watch on conn as apipb's client does, with the
// events read as wireEvents.
func watchWire(ctx context.Context, conn *grpc.ClientConn, req *apipb.WatchRequest) (watchStream, error) {
	cs, err := conn.NewStream(ctx, &apipb.Curator_ServiceDesc.Streams[0], apipb.Curator_Watch_FullMethodName,
		grpc.StaticMethod(), grpc.ForceCodecV2(watchCodec{}))
	if err != nil {
		return nil, err
	}
	s := &grpc.GenericClientStream[apipb.WatchRequest, wireEvent]{ClientStream: cs}
	if err := s.SendMsg(req); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, nil
}
