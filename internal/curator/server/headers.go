package server

import (
	"encoding/binary"
	"log/slog"
	"net"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
)

// gRPC's transport refuses a stream whose header list is larger than
// MaxHeaderListSize itself, before any hook of the server sees the
// stream: it resets it with RST_STREAM(FRAME_SIZE_ERROR). The server
// learns of it from what the connection writes: headerCreds wraps the
// connection that its credentials' handshake returns (TLS or plaintext),
// so that each such reset is counted as a bad_request and logged, as a
// request the server refuses is.
type headerCreds struct {
	credentials.TransportCredentials
	refused func(peer net.Addr)
}

func (c headerCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	return &resetWatch{Conn: conn, refused: c.refused}, info, nil
}

func (c headerCreds) Clone() credentials.TransportCredentials {
	return headerCreds{c.TransportCredentials.Clone(), c.refused}
}

// headerRefused counts and logs (rarely) a stream reset for its headers.
func (s *Server) headerRefused(peer net.Addr) {
	s.m.refused(refusedBadRequest)
	s.badRequests.log(s.log, slog.LevelInfo, "stream refused", "reason", refusedBadRequest,
		"error", "header list larger than the limit", "max_header_list_size", MaxHeaderListSize, "peer", peer.String())
}

// resetWatch reads the frames written to its connection as they pass,
// by their 9-byte headers, and calls refused for each RST_STREAM with
// FRAME_SIZE_ERROR. A frame and its header may span writes.
type resetWatch struct {
	net.Conn
	refused func(peer net.Addr)
	hdr     [9]byte // of the frame being written
	n       int     // bytes of hdr written so far
	left    int     // bytes of the frame's payload still to come
	code    [4]byte // of a RST_STREAM: its error code
	cn      int
}

func (c *resetWatch) Write(p []byte) (int, error) {
	c.scan(p)
	return c.Conn.Write(p)
}

func (c *resetWatch) scan(p []byte) {
	for len(p) > 0 {
		if c.n < len(c.hdr) {
			k := copy(c.hdr[c.n:], p)
			c.n, p = c.n+k, p[k:]
			if c.n < len(c.hdr) {
				return
			}
			c.left, c.cn = int(c.hdr[0])<<16|int(c.hdr[1])<<8|int(c.hdr[2]), 0
		}
		k := min(c.left, len(p))
		if http2.FrameType(c.hdr[3]) == http2.FrameRSTStream {
			c.cn += copy(c.code[c.cn:], p[:k])
		}
		c.left, p = c.left-k, p[k:]
		if c.left > 0 {
			return
		}
		if http2.FrameType(c.hdr[3]) == http2.FrameRSTStream && c.cn == len(c.code) &&
			http2.ErrCode(binary.BigEndian.Uint32(c.code[:])) == http2.ErrCodeFrameSize {
			c.refused(c.RemoteAddr())
		}
		c.n = 0
	}
}
