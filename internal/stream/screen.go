package stream

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// The escape sequences of a screen (xterm's, which every terminal nodewatch
// runs on understands, tmux and the Windows console included).
const (
	altScreen   = "\x1b[?1049h\x1b[?25l" // the alternate screen, the cursor hidden
	leaveScreen = "\x1b[?25h\x1b[?1049l" // the cursor shown, the screen as it was
	home        = "\x1b[H"
	clearLine   = "\x1b[K" // to the end of the line
	clearBelow  = "\x1b[J" // to the end of the screen
	ansiReverse = "\x1b[7m"
	ansiMarked  = "\x1b[7;33m" // reverse, yellow
)

// tick is how often a screen is drawn again without a change: its status
// line says how long ago the last change was, its Age columns how old
// each row is.
const tick = time.Second

// screen is -o table on a terminal: the table drawn in place on the
// alternate screen after each batch, as watch(1) and k9s do, and once a
// second (tick) for the ages. Between its first draw and close, a
// goroutine of its own draws it every tick: mu guards everything below
// it, the writes to w included, so that Encode and that goroutine take
// turns.
type screen struct {
	w     io.Writer
	opts  Options
	every time.Duration // tick; tests shorten it

	mu  sync.Mutex
	t   *table
	err error // the first write error, sticky
	// on: the alternate screen is shown; stop, done: the ticking
	// goroutine's end, asked (closed by close) and reached (closed by
	// the goroutine).
	on         bool
	stop, done chan struct{}
	// rev: the revision of the last batch (0: none told); last: when the
	// last batch that changed something ended; changed: whether the
	// batch being applied changed something so far.
	rev     int64
	last    time.Time
	changed bool
	buf     bytes.Buffer
}

func newScreen(w io.Writer, opts Options) *screen {
	return &screen{w: w, opts: opts, every: tick, t: newTable(opts.Columns, opts.Now)}
}

// encode applies ev, and draws the screen at the end of a batch.
func (s *screen) encode(ev flow.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	switch ev.Type {
	case flow.BatchDone:
		if ev.Rev != 0 {
			s.rev = ev.Rev
		}
		if s.changed {
			s.last = s.opts.Now()
		}
		s.changed = false
		if !s.on {
			s.on = true
			s.buf.WriteString(altScreen)
			s.stop, s.done = make(chan struct{}), make(chan struct{})
			go s.ticking()
		}
		s.draw()
	case flow.New, flow.Updated, flow.Deleted:
		if !s.changed {
			s.t.unmark() // the marks of the last change go, those of this one come
			s.changed = true
		}
		s.t.apply(ev)
	}
	return s.err
}

// ticking draws the screen every tick until close.
func (s *screen) ticking() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.err == nil {
				s.draw()
			}
			s.mu.Unlock()
		}
	}
}

// draw writes the table from the top of the screen: a header, as many rows
// as there are lines for (the others are counted on the status line), and
// the status line, each line cleared to its end and the screen below them,
// in one write. No line reaches the last column, and no newline follows
// the last line, so the screen never scrolls.
func (s *screen) draw() {
	width, height := s.opts.Width, s.opts.Height
	if width <= 0 {
		width = 80
	}
	width-- // a line that filled the last column would wrap, or lose its last cell to clearLine
	now := s.opts.Now()
	rows := s.t.sorted()
	shown := rows
	if height > 2 && len(rows) > height-2 {
		shown = rows[:height-2]
	}
	cells := [][]string{s.t.headers()}
	for _, r := range shown {
		cells = append(cells, s.t.text(r, now))
	}
	widths := fit(natural(cells...), width)
	mark := ansiReverse
	if s.opts.Color {
		mark = ansiMarked
	}
	b := &s.buf
	b.WriteString(home)
	for i, c := range cells {
		var marks []bool
		if i > 0 {
			marks = shown[i-1].marked
		}
		writeRow(b, c, widths, marks, mark)
		b.WriteString(clearLine + "\r\n")
	}
	s.status(b, len(rows), len(rows)-len(shown), now, width)
	b.WriteString(clearLine + clearBelow)
	s.flush()
}

// status writes the status line: how many objects, how many of them
// there was no room for, the revision, how long since the last change.
func (s *screen) status(b *bytes.Buffer, objects, hidden int, now time.Time, width int) {
	parts := []string{fmt.Sprintf("%d %s", objects, plural(objects, "object"))}
	if hidden > 0 {
		parts[0] += fmt.Sprintf(" (%d not shown)", hidden)
	}
	if s.rev != 0 {
		parts = append(parts, fmt.Sprintf("rev %d", s.rev))
	}
	if !s.last.IsZero() {
		parts = append(parts, "last change "+age(now.Sub(s.last))+" ago")
	}
	if s.opts.Color {
		b.WriteString(ansiDim)
	}
	pad(b, strings.Join(parts, " · "), width, true)
	if s.opts.Color {
		b.WriteString(ansiReset)
	}
}

// flush writes out buf; the first error is kept.
func (s *screen) flush() {
	if s.err == nil && s.buf.Len() > 0 {
		_, s.err = s.w.Write(s.buf.Bytes())
	}
	s.buf.Reset()
}

// close stops the drawing and leaves the alternate screen, so that the
// terminal shows what it showed before. With final (the run met its
// goal), the table as it last was is printed there once, without marks
// or status line, as a table printed by a command that ends: the state
// the goal was met in stays on the terminal. close blocks until the
// ticking goroutine has ended; the encoder is not used after it.
func (s *screen) close(final bool) error {
	s.mu.Lock()
	on := s.on
	s.mu.Unlock()
	if on {
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.buf.WriteString(leaveScreen)
		s.on = false
	}
	if final && s.err == nil {
		width := s.opts.Width
		if width <= 0 {
			width = 80
		}
		now := s.opts.Now()
		cells := [][]string{s.t.headers()}
		for _, r := range s.t.sorted() {
			cells = append(cells, s.t.text(r, now))
		}
		widths := fit(natural(cells...), width-1)
		for _, c := range cells {
			writeRow(&s.buf, c, widths, nil, "")
			s.buf.WriteByte('\n')
		}
	}
	s.flush()
	return s.err
}
