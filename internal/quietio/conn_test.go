package quietio

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestConnErrors: a connection read through raw calls ends as
// net.Conn does, in the same words (dial's explanations of a failed
// connection, and gRPC, look at them). Each case runs on a plain
// connection and on a quiet one; the messages must match once each names
// its own addresses the same way.
func TestConnErrors(t *testing.T) {
	if !Supported {
		t.Skip("no raw calls on this system")
	}
	cases := []struct {
		name string
		end  func(c, s *net.TCPConn) // ends the connection as the case says
		use  func(c net.Conn) error  // until it fails
		is   error                   // what the error must be, by errors.Is
	}{
		{"read: end of stream", func(_, s *net.TCPConn) { s.Close() }, read, io.EOF},
		{"read: reset", func(_, s *net.TCPConn) { s.SetLinger(0); s.Close() }, read, syscall.ECONNRESET},
		{"read: deadline", func(c, _ *net.TCPConn) { c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)) }, read, os.ErrDeadlineExceeded},
		{"read: closed here", func(c, _ *net.TCPConn) { c.Close() }, read, net.ErrClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var msgs [2]string
			for i, wrap := range []bool{false, true} {
				c, s := testkit.TCPPair(t)
				var conn net.Conn = c
				if wrap {
					conn = Conn(c)
					if _, ok := conn.(*netConn); !ok {
						t.Fatal("a TCP connection was not wrapped")
					}
				}
				// A byte each way that works, then the end.
				if _, err := s.Write([]byte{7}); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 4)
				if n, err := conn.Read(b); n != 1 || err != nil || b[0] != 7 {
					t.Fatalf("first read: %d %v", n, err)
				}
				if _, err := conn.Write([]byte{8}); err != nil {
					t.Fatalf("first write: %v", err)
				}
				if _, err := io.ReadFull(s, b[:1]); err != nil || b[0] != 8 {
					t.Fatalf("the peer read %v: %v", b[0], err)
				}
				tc.end(c, s)
				err := tc.use(conn)
				if !errors.Is(err, tc.is) {
					t.Fatalf("wrapped=%v: %v, want %v", wrap, err, tc.is)
				}
				msg := strings.ReplaceAll(err.Error(), c.LocalAddr().String(), "LOCAL")
				msgs[i] = strings.ReplaceAll(msg, c.RemoteAddr().String(), "REMOTE")
			}
			if msgs[0] != msgs[1] {
				t.Fatalf("net.Conn says %q, the quiet connection %q", msgs[0], msgs[1])
			}
		})
	}
}

func read(c net.Conn) error {
	b := make([]byte, 4)
	for {
		if _, err := c.Read(b); err != nil {
			return err
		}
	}
}

// TestConnLeavesOthers: what is not a bare socket is used as it is: a
// wrapper that exposes its socket may buffer what it reads.
func TestConnLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Conn(a) != a {
		t.Fatal("net.Pipe was wrapped")
	}
	c, _ := testkit.TCPPair(t)
	wrapped := struct{ *net.TCPConn }{c}
	if Conn(wrapped) != net.Conn(wrapped) {
		t.Fatal("a wrapper of a TCP connection was wrapped")
	}
}
