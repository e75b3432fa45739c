package quietio

import (
	"io"
	"sync"
	"syscall"
)

// Supported reports whether raw calls are made on this system.
const Supported = true

// op is one read or write in progress: the RawConn calls fn (the
// Reader's read or the Writer's write, bound once, so that a call
// allocates no closure) with the descriptor until it returns true.
type op struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool

	mu  sync.Mutex // serializes calls; guards the fields below
	buf []byte
	n   int
	err error
}

func (o *op) do(b []byte, call func(func(uintptr) bool) error) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf, o.n, o.err = b, 0, nil
	err := call(o.fn)
	n := o.n
	if err == nil {
		err = o.err
	}
	o.buf, o.err = nil, nil
	return n, err
}

// read makes one read(2): done unless it would block.
func (r *Reader) read(fd uintptr) bool {
	for {
		n, e := sysRead(fd, r.buf)
		switch e {
		case 0:
			r.n = n
			if n == 0 {
				r.err = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.err = e
		return true
	}
}

// write makes write(2) calls until all of the buffer is written: done
// unless one would block.
func (w *Writer) write(fd uintptr) bool {
	for w.n < len(w.buf) {
		n, e := sysWrite(fd, w.buf[w.n:])
		switch {
		case e == 0 && n == 0:
			// write(2) makes progress on a pipe or a socket; never spin.
			w.err = io.ErrShortWrite
			return true
		case e == 0:
			w.n += n
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		default:
			w.err = e
			return true
		}
	}
	return true
}
