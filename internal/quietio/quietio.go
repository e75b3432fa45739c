// Package quietio reads and writes non-blocking descriptors with raw
// read(2) and write(2) calls, which the Go scheduler does not see.
//
// Why: a Go program that waits between messages lets every P go idle,
// and the runtime's monitor thread (sysmon) then sleeps until the next
// timer. The first ordinary syscall after that (net.Conn's read of the
// next message, the write of its line) wakes the monitor, which polls
// every 20 µs until the program is idle again and goes back to sleep:
// three context switches of a thread that has nothing to do, for every
// message. A watch that prints one change at a time (single puts of
// 200 B, each its own message and its own line) spent a fifth of its CPU
// there, by perf's samples of the process. A raw call on a non-blocking
// descriptor cannot block, so the scheduler need not know of it; when it
// would block (EAGAIN), the caller waits in the runtime's poller as
// net.Conn and os.File do.
//
// A Reader or Writer is safe for concurrent use; calls are serialized.
package quietio

import "syscall"

// Reader reads a non-blocking descriptor through its RawConn.
type Reader struct {
	op
}

// NewReader returns a Reader of rc's descriptor, which must be
// non-blocking (a net.Conn's, an os.File registered with the poller);
// nil where raw calls are not supported (see Supported).
func NewReader(rc syscall.RawConn) *Reader {
	if !Supported {
		return nil
	}
	r := &Reader{op{rc: rc}}
	r.fn = r.read
	return r
}

// Read reads into b as io.Reader says: at least one byte, waiting for
// some; 0 and io.EOF at the end. Errors are the descriptor's (an errno),
// or the poller's (a deadline, a closed descriptor).
func (r *Reader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return r.do(b, r.rc.Read)
}

// Writer writes to a non-blocking descriptor through its RawConn.
type Writer struct {
	op
}

// NewWriter returns a Writer to rc's descriptor, which must be
// non-blocking; nil where raw calls are not supported (see Supported).
func NewWriter(rc syscall.RawConn) *Writer {
	if !Supported {
		return nil
	}
	w := &Writer{op{rc: rc}}
	w.fn = w.write
	return w
}

// Write writes all of p, waiting for room as often as it takes, or
// returns how much it wrote and why it stopped.
func (w *Writer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return w.do(p, w.rc.Write)
}
