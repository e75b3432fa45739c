package progress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestMeter(t *testing.T) {
	var term bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := New(&term, time.Second)
	m.now = c.now
	out := m.Writer(io.Discard)
	step := func(what string, do func(), want string) {
		t.Helper()
		term.Reset()
		do()
		if got := term.String(); got != want {
			t.Errorf("%s: terminal got %q, want %q", what, got, want)
		}
	}
	step("no listing", m.draw, "")
	m.Listed(0)
	c.advance(500 * time.Millisecond)
	step("a listing younger than a second", m.draw, "")
	c.advance(1500 * time.Millisecond)
	m.Listed(5000)
	step("after two seconds", m.draw, "\rnodewatch: listing… 5,000 objects, 2,500/s\x1b[K")
	step("a write by others", func() { out.Write([]byte("line\n")) }, "\r\x1b[K")
	step("a write with the line gone", func() { out.Write([]byte("line\n")) }, "")
	c.advance(2 * time.Second)
	m.Listed(1234567)
	step("redrawn", m.draw, "\rnodewatch: listing… 1,234,567 objects, 308,641/s\x1b[K")
	m.Done()
	step("done: erased at the next tick", m.draw, "\r\x1b[K")
	step("and not drawn again", m.draw, "")
	m.Listed(1)
	step("a new listing starts its own second", m.draw, "")
}

// TestMeterRunErases: a run that ends erases the line it drew.
func TestMeterRunErases(t *testing.T) {
	var term testkit.Buffer
	m := New(&term, time.Nanosecond)
	m.Listed(7)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	testkit.Eventually(t, func() error {
		if !bytes.Contains(term.Bytes(), []byte("7 objects")) {
			return fmt.Errorf("no line drawn: %q", term.String())
		}
		return nil
	})
	cancel()
	<-done
	if got := term.String(); !bytes.HasSuffix([]byte(got), []byte("\r\x1b[K")) {
		t.Errorf("terminal ends with %q, want the line erased", got)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}

// blockingWriter blocks every write until its channel is closed, as a
// pipe whose reader stopped reading does.
type blockingWriter chan struct{}

func (b blockingWriter) Write(p []byte) (int, error) {
	<-b
	return len(p), nil
}

// TestMeterStalledWriteHoldsNobody: a write through Writer that blocks (a
// stalled stdout) holds up neither another writer (a log line on stderr)
// nor the sources' reports nor the end of Run.
func TestMeterStalledWriteHoldsNobody(t *testing.T) {
	var term testkit.Buffer
	m := New(&term, time.Nanosecond)
	stall := make(blockingWriter)
	defer close(stall)
	go m.Writer(stall).Write([]byte("line\n"))
	testkit.Eventually(t, func() error {
		if m.writing.Load() == 0 {
			return errors.New("the stalled write never started")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Writer(&term).Write([]byte("nodewatch: a log line\n"))
		m.Listed(3)
		m.draw()
		m.Done()
		cancel()
		m.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(testkit.Timeout):
		t.Fatal("held up by a stalled write")
	}
	if got := term.String(); got != "nodewatch: a log line\n" {
		t.Errorf("terminal got %q; want the log line and no progress drawn while a write is under way", got)
	}
}
