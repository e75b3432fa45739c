package dial

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/quietio"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestQuietConnErrors: a connection read through raw calls ends as
// net.Conn does, in the same words (the explanations of a failed
// connection, and gRPC, look at them): the end of the stream, a reset, a
// deadline, a connection closed here. Each case runs on a plain
// connection and on a quiet one; the messages must match once each names
// its own addresses the same way.
func TestQuietConnErrors(t *testing.T) {
	if !quietio.Supported {
		t.Skip("no raw calls on this system")
	}
	cases := []struct {
		name string
		end  func(c, s *net.TCPConn) // ends the connection as the case says
		is   error                   // what the error must be, by errors.Is
	}{
		{"end of stream", func(_, s *net.TCPConn) { s.Close() }, io.EOF},
		{"reset", func(_, s *net.TCPConn) { s.SetLinger(0); s.Close() }, syscall.ECONNRESET},
		{"deadline", func(c, _ *net.TCPConn) { c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)) }, os.ErrDeadlineExceeded},
		{"closed here", func(c, _ *net.TCPConn) { c.Close() }, net.ErrClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var msgs [2]string
			for i, wrap := range []bool{false, true} {
				c, s := testkit.TCPPair(t)
				var conn net.Conn = c
				if wrap {
					conn = quiet(c)
					if _, ok := conn.(*quietConn); !ok {
						t.Fatal("a TCP connection was not made quiet")
					}
				}
				// The peer's byte first: a read that works, then the end.
				if _, err := s.Write([]byte{7}); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 4)
				if n, err := conn.Read(b); n != 1 || err != nil || b[0] != 7 {
					t.Fatalf("first read: %d %v", n, err)
				}
				tc.end(c, s)
				var err error
				for err == nil { // until the end shows
					_, err = conn.Read(b)
				}
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

// TestQuietLeavesOthers: what is not a socket of this process is read as
// it is.
func TestQuietLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if quiet(a) != a {
		t.Fatal("net.Pipe was wrapped")
	}
}
