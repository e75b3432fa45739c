//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// h2Conn is one HTTP/2 connection to serve carrying many Watch streams,
// all read by one goroutine: a load client that costs little per event.
// grpc-go's client spends a goroutine, a receive buffer and a wake-up
// per stream and event, more CPU than serve spends sending it, and on
// the machine serve runs on that is measured as serve's latency. It
// speaks as much HTTP/2 and gRPC as a Watch stream needs: requests,
// responses, trailers, flow control, pings.
type h2Conn struct {
	conn      net.Conn
	fr        *http2.Framer
	authority string
	// event is called (by run, one call at a time) with each message
	// a stream receives, in order; end once when the stream ends.
	event func(s *h2Stream, msg []byte)
	end   func(s *h2Stream, err error)

	wmu  sync.Mutex // guards the writes: bw, fr's writes, henc, hbuf, next
	bw   *bufio.Writer
	henc *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // the next stream id

	mu      sync.Mutex // guards streams
	streams map[uint32]*h2Stream
}

// h2Stream is a Watch stream of an h2Conn; its fields belong to run.
type h2Stream struct {
	id      uint32
	i       int    // the caller's number for it
	partial []byte // the start of a message not received whole yet
	unacked uint32 // bytes received and not yet given back to the flow-control window
	last    bool   // it had its backlog
}

// Flow control: what the client lets serve send ahead, and when it gives
// the window back.
const (
	h2StreamWindow = 1 << 24
	h2ConnWindow   = 1 << 30
	h2Return       = 1 << 20
)

// dialH2 connects to serve at addr.
func dialH2(addr string, event func(*h2Stream, []byte), end func(*h2Stream, error)) (*h2Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{conn: conn, authority: addr, event: event, end: end, next: 1, streams: map[uint32]*h2Stream{},
		bw: bufio.NewWriterSize(conn, 64<<10)}
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.bw.WriteString(http2.ClientPreface)
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow}); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, h2ConnWindow-65535); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// watch opens a Watch (nodes_in_cluster) stream, numbered i by the caller.
func (c *h2Conn) watch(i int) error {
	req, err := proto.Marshal(watchAll)
	if err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	msg = append(msg, req...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	s := &h2Stream{id: c.next, i: i}
	c.next += 2
	c.mu.Lock()
	c.streams[s.id] = s
	c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", apipb.Curator_Watch_FullMethodName},
		{":authority", c.authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	if err := c.fr.WriteData(s.id, true, msg); err != nil {
		return err
	}
	return c.bw.Flush()
}

// run reads the connection until it fails or is closed, and then ends
// every stream left with the error.
func (c *h2Conn) run() {
	err := c.read()
	c.mu.Lock()
	left := c.streams
	c.streams = map[uint32]*h2Stream{}
	c.mu.Unlock()
	for _, s := range left {
		c.end(s, err)
	}
}

func (c *h2Conn) read() error {
	var connUnacked uint32
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := c.write(func() error { return c.fr.WriteSettingsAck() }); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := c.write(func() error { return c.fr.WritePing(true, f.Data) }); err != nil {
					return err
				}
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("serve said GOAWAY (%v)", f.ErrCode)
		case *http2.RSTStreamFrame:
			c.ended(f.StreamID, fmt.Errorf("stream reset (%v)", f.ErrCode))
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // the response's headers
			}
			err := io.EOF
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" && h.Value != "0" {
					err = fmt.Errorf("grpc-status %s: %s", h.Value, grpcMessage(f))
				}
			}
			c.ended(f.StreamID, err)
		case *http2.DataFrame:
			n := f.Header().Length
			connUnacked += n
			c.mu.Lock()
			s := c.streams[f.StreamID]
			c.mu.Unlock()
			if s != nil {
				s.unacked += n
				c.data(s, f.Data())
			}
			if err := c.giveBack(s, &connUnacked); err != nil {
				return err
			}
			if f.StreamEnded() {
				c.ended(f.StreamID, io.ErrUnexpectedEOF)
			}
		}
	}
}

// data takes the bytes of a DATA frame of s: whole gRPC messages are
// handed to event as they are, without a copy, and the start of one
// that is not whole is kept until the rest comes.
func (c *h2Conn) data(s *h2Stream, b []byte) {
	if len(s.partial) > 0 {
		s.partial = append(s.partial, b...)
		b = s.partial
	}
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if len(b) < 5+n {
			break
		}
		c.event(s, b[5:5+n])
		b = b[5+n:]
	}
	// The framer reuses its buffer: keep a copy of what is left.
	s.partial = append(s.partial[:0], b...)
}

// giveBack returns what was read to serve's flow-control windows, once it
// is enough to be worth a frame.
func (c *h2Conn) giveBack(s *h2Stream, connUnacked *uint32) error {
	return c.write(func() error {
		if s != nil && s.unacked >= h2Return {
			if err := c.fr.WriteWindowUpdate(s.id, s.unacked); err != nil {
				return err
			}
			s.unacked = 0
		}
		if *connUnacked >= h2Return {
			if err := c.fr.WriteWindowUpdate(0, *connUnacked); err != nil {
				return err
			}
			*connUnacked = 0
		}
		return nil
	})
}

// write writes frames (what fn writes) and flushes them.
func (c *h2Conn) write(fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := fn(); err != nil {
		return err
	}
	if c.bw.Buffered() == 0 {
		return nil
	}
	return c.bw.Flush()
}

// ended ends stream id with err.
func (c *h2Conn) ended(id uint32, err error) {
	c.mu.Lock()
	s := c.streams[id]
	delete(c.streams, id)
	c.mu.Unlock()
	if s != nil {
		c.end(s, err)
	}
}

// close closes the connection; run returns.
func (c *h2Conn) close() error { return c.conn.Close() }

// grpcMessage returns the grpc-message of trailers.
func grpcMessage(f *http2.MetaHeadersFrame) string {
	for _, h := range f.RegularFields() {
		if h.Name == "grpc-message" {
			return h.Value
		}
	}
	return ""
}
