package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// codec is the gRPC codec Serve serves with: gRPC's protobuf codec,
// except that a sharedEvent is sent as the bytes it holds. gRPC's codec
// would copy them into a buffer of its own for every stream; a backlog's
// events are made once for every stream that starts at the same state, and
// a change's event once for every stream, so sent as they are, no stream
// holds a copy of its own. (gRPC's buffers come from a pool whose sizes
// step from 32 KiB to 1 MiB: a backlog of 33 KB took a 1 MiB buffer for
// every stream it was sent to at once.)
//
// A server without it (a grpc.Server made elsewhere, given to Register)
// sends the same bytes, copied.
type codec struct {
	proto encoding.CodecV2 // gRPC's
}

// ServerCodec is the grpc.ServerOption that gives a grpc.Server the codec
// Serve serves with (see Serve); it is optional.
func ServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2(protocodec.Name)})
}

func (codec) Name() string { return protocodec.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if ev, ok := v.(*sharedEvent); ok {
		// gRPC only reads it, and frees nothing a SliceBuffer holds:
		// every stream can be given the same.
		return ev.data, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal decodes data into v, or, for a decoding, into its message,
// keeping the error for the decoding's stream to answer (see
// decodeRequests): returned to gRPC, it would be sent at once as gRPC's
// own failure, codes.Internal, whatever the handler returns then.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*decoding); ok {
		d.err = c.proto.Unmarshal(data, d.m)
		return nil
	}
	return c.proto.Unmarshal(data, v)
}
