package server

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What the server makes of requests it cannot serve: each is answered
// codes.InvalidArgument (codes.Unimplemented for what is valid but not
// served), counted as bad_request in streams_refused_total, and logged as
// "stream refused" at info, rarely (see rareLog), with whatever the client
// sent cut short.

// MaxNodeIDLen is the longest node id a Watch may name, in bytes. A
// Metropolis node id is "metropolis-" and 32 hex digits; other ids in
// etcd are keys' last segments, of tens of bytes.
const MaxNodeIDLen = 256

// quotedIDLen is how much of a node id an error or a log line quotes.
const quotedIDLen = 64

// nodeIDProblem returns why id cannot name a node in a Watch request, or
// "": it must be set, at most MaxNodeIDLen bytes, printable UTF-8, and
// without '/' (a node's key is the prefix and its id).
func nodeIDProblem(id string) string {
	switch {
	case id == "":
		return "must be set"
	case len(id) > MaxNodeIDLen:
		return fmt.Sprintf("longer than %d bytes", MaxNodeIDLen)
	case !utf8.ValidString(id):
		return "not UTF-8"
	case strings.Contains(id, "/"):
		return "contains '/'"
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Sprintf("unprintable character %U at byte %d", r, i)
	}
	return ""
}

// quoteID quotes id as errors and logs show it: its first quotedIDLen
// bytes, and its length if it is longer.
func quoteID(id string) string {
	if len(id) <= quotedIDLen {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("%q… (%d bytes)", id[:quotedIDLen], len(id))
}

// badRequest counts and logs (rarely) a stream refused for its request,
// with err, the status it is refused with.
func (s *Server) badRequest(log *slog.Logger, err error) {
	s.m.refused(refusedBadRequest)
	s.badRequests.log(log, slog.LevelInfo, "stream refused", "reason", refusedBadRequest,
		"code", status.Code(err).String(), "error", status.Convert(err).Message())
}

// decodeRequests is the stream interceptor of Serve that answers a
// request that cannot be decoded with codes.InvalidArgument, as a bad
// request: gRPC's own answer, codes.Internal, would say that the server
// failed. It needs Serve's codec, which tells it that the message did not
// decode (see decoding); a unary call (grpc.health.v1.Health/Check) gets
// gRPC's answer, which no interceptor can change.
func (s *Server) decodeRequests(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &decodedStream{ServerStream: ss, s: s, method: methodName(info.FullMethod)})
}

// decoding is what decodedStream asks the codec to decode into: m, the
// message, and the error decoding it failed with, which the codec keeps
// from gRPC (which would answer it as its own failure). When err is set,
// m is left half decoded and is not to be used.
type decoding struct {
	m   any
	err error
}

// decodedStream is a stream whose requests the codec decodes through a
// decoding.
type decodedStream struct {
	grpc.ServerStream
	s      *Server
	method string
}

func (ds *decodedStream) RecvMsg(m any) error {
	d := &decoding{m: m}
	if err := ds.ServerStream.RecvMsg(d); err != nil || d.err == nil {
		return err
	}
	err := status.Errorf(codes.InvalidArgument, "%s: the request cannot be decoded: %v", ds.method, d.err)
	log := ds.s.log.With(append([]any{slog.String("method", ds.method)}, connAttrs(ds.Context())...)...)
	ds.s.badRequest(log, err)
	return err
}
