package dial

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/nodewatch/nodewatch/internal/quietio"
)

// quietConn is a connection read with raw read(2) calls (package
// quietio): a watch reads one message at a time, and an ordinary read
// after a quiet spell wakes the Go runtime's monitor thread. Its errors
// are net.Conn's: "read tcp 127.0.0.1:1->127.0.0.1:2: connection reset
// by peer".
type quietConn struct {
	net.Conn
	r *quietio.Reader
}

// quiet returns c read through raw calls, or c itself where that cannot
// be done (not a socket of this process, no raw calls on this system).
func quiet(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok || !quietio.Supported {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &quietConn{Conn: c, r: quietio.NewReader(rc)}
}

func (q *quietConn) Read(b []byte) (int, error) {
	n, err := q.r.Read(b)
	if err == nil || err == io.EOF {
		return n, err
	}
	// The RawConn says "raw-read" of its own errors (a deadline, a
	// closed connection); read(2)'s come bare.
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError("read", errno)
	}
	return n, &net.OpError{Op: "read", Net: q.LocalAddr().Network(), Source: q.LocalAddr(), Addr: q.RemoteAddr(), Err: err}
}
