package render

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// checkOutputMax is how much of what a --check printed its report shows:
// the end, where the reason usually is.
const checkOutputMax = 4 << 10

// tail keeps the last max bytes written to it.
type tail struct {
	max int

	mu        sync.Mutex // guards what follows
	b         []byte
	truncated bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		// Not in the middle of a character.
		for over < len(t.b) && !utf8.RuneStart(t.b[over]) {
			over++
		}
		t.b = append(t.b[:0], t.b[over:]...)
		t.truncated = true
	}
	return len(p), nil
}

// String returns what was kept, without its last newline, and with "…"
// in front when the beginning was dropped.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSuffix(string(t.b), "\n")
	if t.truncated {
		s = "…" + s
	}
	return s
}
