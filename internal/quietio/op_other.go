//go:build !linux

package quietio

import "syscall"

// Supported reports whether raw calls are made on this system.
const Supported = false

type op struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool
}

func (o *op) do([]byte, func(func(uintptr) bool) error) (int, error) {
	panic("quietio: not supported")
}

func (r *Reader) read(uintptr) bool  { panic("quietio: not supported") }
func (w *Writer) write(uintptr) bool { panic("quietio: not supported") }
