package quietio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/nodewatch/nodewatch/internal/fast"
)

// Conn returns c read through raw calls, or c itself where that cannot
// be done (no raw calls on this system) or would be wrong.
// Only a bare *net.TCPConn or *net.UnixConn is taken: a wrapper that
// exposes its socket (syscall.Conn) may buffer or decrypt what it reads.
// Its errors are net.Conn's, word for word: "read tcp
// 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer" (but a
// connection dialled as "tcp4" is named "tcp").
func Conn(c net.Conn) net.Conn {
	var sc syscall.Conn
	switch c := c.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	}
	if sc == nil || !Supported || !fast.On(fast.RawIO) {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &netConn{Conn: c, r: NewReader(rc)}
}

// netConn is a connection read by a Reader. Its writes are net.Conn's: a
// client writes little (window updates, pings). serve's own connections
// are left as they are: with them read, and written (up to 4 KiB a
// write), through raw calls, its fan-out to 10,000 streams had a worse
// p99, in one run well past the 100 ms it is meant to stay under
// (measured with make bench-compare).
type netConn struct {
	net.Conn
	r *Reader
}

func (q *netConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return q.Conn.Read(b) // what net.Conn says of a closed one
	}
	n, err := q.r.Read(b)
	if err == nil || err == io.EOF {
		return n, err
	}
	return n, q.readError(err)
}

// readError says err as net.Conn would: the RawConn says "raw-read" of
// its own errors (a deadline, a closed connection), and read(2)'s come
// bare.
func (q *netConn) readError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError("read", errno)
	}
	return &net.OpError{Op: "read", Net: q.LocalAddr().Network(), Source: q.LocalAddr(), Addr: q.RemoteAddr(), Err: err}
}
