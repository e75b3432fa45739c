package watch

import (
	"errors"
	"io"
	"sync/atomic"
)

// gate writes to w until it is closed; then every write fails at once. Run
// closes it when it abandons a reader of the batches blocked in a write,
// so that nothing more is written once Run has returned. The write in
// progress goes on until w returns.
type gate struct {
	w      io.Writer
	closed atomic.Bool
}

var errWriteAbandoned = errors.New("write abandoned: the reader does not read")

func (g *gate) Write(p []byte) (int, error) {
	if g.closed.Load() {
		return 0, errWriteAbandoned
	}
	return g.w.Write(p)
}

func (g *gate) close() { g.closed.Store(true) }
