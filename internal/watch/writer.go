package watch

import (
	"errors"
	"io"
	"time"
)

// abandonableWriter writes to w, but gives up on writes still blocked
// grace after stop is closed (one deadline for all of them): the reader of
// a pipe may have stopped reading (`| sleep 60`, a paused pager), and a
// signal or a timeout must still end the run. The abandoned write goes on
// in its goroutine until w returns; the encoder's error is sticky, so
// nothing writes after it. It is used by one goroutine.
type abandonableWriter struct {
	w         io.Writer
	stop      <-chan struct{}
	grace     time.Duration
	deadline  <-chan time.Time // set once stop is seen closed
	abandoned bool             // the deadline passed: every write gives up at once
}

var errWriteAbandoned = errors.New("write abandoned: the reader does not read")

func (a *abandonableWriter) Write(p []byte) (int, error) {
	if a.abandoned {
		return 0, errWriteAbandoned
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := a.w.Write(p)
		done <- result{n, err}
	}()
	if a.deadline == nil {
		select {
		case r := <-done:
			return r.n, r.err
		case <-a.stop:
			a.deadline = time.After(a.grace)
		}
	}
	select {
	case r := <-done:
		return r.n, r.err
	case <-a.deadline:
		a.abandoned = true
		return 0, errWriteAbandoned
	}
}
