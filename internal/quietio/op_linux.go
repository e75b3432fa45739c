package quietio

import (
	"io"
	"sync"
	"syscall"
	"unsafe"
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
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(r.buf))), uintptr(len(r.buf)))
		switch e {
		case 0:
			r.n = int(n)
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
		rest := w.buf[w.n:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)))
		switch e {
		case 0:
			w.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = e
			return true
		}
	}
	return true
}
