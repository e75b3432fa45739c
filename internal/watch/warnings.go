package watch

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultWarnEvery is how often a warning that keeps recurring is
// summarized (Options.WarnEvery).
const DefaultWarnEvery = 10 * time.Second

// warnings reports jq evaluation errors without flooding stderr: the
// first of a kind (the errors of one program, "--filter", whichever
// object and value) in full, then a count of the ones like it at most
// every interval, and what is still uncounted when the run ends. A filter that fails on every object of a
// 10,000-node fleet is one line, not 10,000. Safe for concurrent use.
type warnings struct {
	logf  func(format string, args ...any)
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex // guards kinds and order
	kinds map[string]*warnKind
	order []string // kinds in the order first seen, for flush
}

// warnKind is one kind of warning: how many went unreported since the
// last line about it, and on which object the last one was.
type warnKind struct {
	held            int
	lastID, lastMsg string
	reported        time.Time
}

func newWarnings(logf func(format string, args ...any), every time.Duration) *warnings {
	if every <= 0 {
		every = DefaultWarnEvery
	}
	return &warnings{logf: logf, every: every, now: time.Now, kinds: map[string]*warnKind{}}
}

// warn reports msg about the object id ("" for none).
func (w *warnings) warn(id, msg string) {
	if w.logf == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	kind, _, _ := strings.Cut(msg, ": ") // the program's name
	k, seen := w.kinds[kind]
	if !seen {
		w.kinds[kind] = &warnKind{reported: w.now()}
		w.order = append(w.order, kind)
		w.logf("warning: %s (treated as no match)", withID(id, msg))
		return
	}
	k.held++
	k.lastID, k.lastMsg = id, msg
	if w.now().Sub(k.reported) >= w.every {
		w.summarize(kind, k)
	}
}

// flush reports what is still held back.
func (w *warnings) flush() {
	if w.logf == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, kind := range w.order {
		if k := w.kinds[kind]; k.held > 0 {
			w.summarize(kind, k)
		}
	}
}

func (w *warnings) summarize(kind string, k *warnKind) {
	w.logf("warning: %s: %d more errors (treated as no match), the last: %s", kind, k.held, withID(k.lastID, k.lastMsg))
	k.held, k.reported = 0, w.now()
}

func withID(id, msg string) string {
	if id == "" {
		return msg
	}
	return fmt.Sprintf("%q: %s", id, msg)
}
