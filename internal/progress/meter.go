// Package progress shows, on a terminal, how a long listing advances: a
// watch prints nothing until its initial state (or a resync) is complete,
// and listing a large prefix or backlog can take seconds in which the
// person at the terminal would otherwise see nothing at all.
//
// A Meter draws one line on stderr, "nodewatch: listing… 45,000 objects,
// 30,120/s", once a listing has run for a while, rewrites it in place, and
// erases it when the listing is handed over. It is for terminals only: the
// caller creates one only when stderr is a terminal, so that nothing of it
// ever reaches a pipe or a file. Writes to the terminal by others (log
// lines, and stdout when it is the same terminal) go through Writer, which
// erases the line first, so that the line never splits theirs.
package progress

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultAfter is how long a listing runs before its progress is shown.
const DefaultAfter = time.Second

// tick is how often the line is redrawn.
const tick = 200 * time.Millisecond

// Meter shows listing progress on a terminal. Its methods are safe for
// concurrent use: sources report from their goroutines, Run draws from its
// own. Listed and Done never wait for the terminal, so a source is never
// held up by a paused one.
type Meter struct {
	term  io.Writer
	after time.Duration
	now   func() time.Time

	// mu guards the state of the listing; it is never held while writing.
	mu      sync.Mutex
	listing bool      // a listing is under way
	start   time.Time // when it began
	n       int       // objects listed so far

	// termMu orders the Meter's writes to the terminal with the erasing
	// done for others' writes through Writer, and guards shown. It is
	// never held during others' writes: one to a stalled reader must not
	// hold up a log line elsewhere. Instead writing counts those under
	// way, and the line is not drawn while one is.
	termMu  sync.Mutex
	shown   bool // the line is on the terminal
	writing atomic.Int32
}

// New returns a Meter that draws on term (a terminal) once a listing has
// run for after (0: DefaultAfter).
func New(term io.Writer, after time.Duration) *Meter {
	if after <= 0 {
		after = DefaultAfter
	}
	return &Meter{term: term, after: after, now: time.Now}
}

// Listed reports that the listing under way has read n objects so far; the
// first call after Done (or ever) starts a listing.
func (m *Meter) Listed(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.listing {
		m.listing, m.start = true, m.now()
	}
	m.n = n
}

// Done reports that the listing was handed over. The line goes at the
// next tick, or before anything else is written through Writer.
func (m *Meter) Done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listing = false
}

// Run draws the line while listings run, until ctx ends; then it erases
// it. The caller waits for Run to return. Run never waits for a write by
// others: one that blocks (a paused terminal) must not keep a run that
// has to end from ending, so a busy terminal is left alone.
func (m *Meter) Run(ctx context.Context) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if m.termMu.TryLock() {
				m.erase()
				m.termMu.Unlock()
			}
			return
		case <-t.C:
			m.draw()
		}
	}
}

// line returns the progress line to show now, "" for none.
func (m *Meter) line() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.listing {
		return ""
	}
	elapsed := m.now().Sub(m.start)
	if elapsed < m.after {
		return ""
	}
	rate := float64(m.n) / elapsed.Seconds()
	return fmt.Sprintf("nodewatch: listing… %s objects, %s/s", group(int64(m.n)), group(int64(rate)))
}

// draw writes the line, or erases it when no listing is long enough.
func (m *Meter) draw() {
	if !m.termMu.TryLock() {
		return // erasing for someone's write: next tick
	}
	defer m.termMu.Unlock()
	if m.writing.Load() > 0 {
		return // the write comes after the erasing: next tick
	}
	l := m.line()
	if l == "" {
		m.erase()
		return
	}
	// \r back to the start of the line, \x1b[K erases what was there.
	io.WriteString(m.term, "\r"+l+"\x1b[K")
	m.shown = true
}

// erase removes the line; termMu must be held.
func (m *Meter) erase() {
	if m.shown {
		io.WriteString(m.term, "\r\x1b[K")
		m.shown = false
	}
}

// Writer returns w, through which every write first erases the line (and
// is ordered with the Meter's own writes). The line is drawn again at the
// next tick while the listing goes on.
func (m *Meter) Writer(w io.Writer) io.Writer { return &eraser{m: m, w: w} }

type eraser struct {
	m *Meter
	w io.Writer
}

func (e *eraser) Write(b []byte) (int, error) {
	e.m.writing.Add(1)
	defer e.m.writing.Add(-1)
	e.m.termMu.Lock()
	e.m.erase()
	e.m.termMu.Unlock()
	return e.w.Write(b)
}

// group formats n with thousands separators: 1234567 → "1,234,567".
func group(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
