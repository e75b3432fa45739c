package testkit

import (
	"bytes"
	"fmt"
	"sync"
)

// Buffer collects what is written to it, safe for writers and readers on
// several goroutines: a process's stderr, a log that the test reads while
// it is written. The zero Buffer is empty and keeps everything.
type Buffer struct {
	// Max, if above 0, is how much of the end of what was written the
	// buffer keeps; a long-running process's stderr wants a bound.
	Max int

	mu sync.Mutex // guards b
	b  []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if over := len(b.b) - b.Max; b.Max > 0 && over > 0 {
		b.b = append(b.b[:0], b.b[over:]...)
	}
	return len(p), nil
}

// Logf writes a line, formatted as fmt.Sprintf does; it can serve as the
// Logf of what logs.
func (b *Buffer) Logf(format string, args ...any) {
	b.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

// Bytes returns a copy of what the buffer holds.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b)
}

// String returns what the buffer holds.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// Len returns how many bytes the buffer holds.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.b)
}
