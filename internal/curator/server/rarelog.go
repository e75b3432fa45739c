package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rareEvery is how often a rareLog lets a line through.
const rareEvery = 10 * time.Second

// rareLog lets one kind of log line through at most once per every, so
// that what any client can repeat at will (a bad request, a connection
// past the limit) cannot fill the log: the first line goes at once, and
// the lines held back after it are counted and named by the next one let
// through (suppressed=N). The metrics count every one. The zero value
// lets every line through; a rareLog is safe for concurrent use.
type rareLog struct {
	every time.Duration

	mu   sync.Mutex // guards the fields below
	next time.Time  // before it, lines are held back
	held int        // lines held back since the last one let through
}

// log logs msg with args on l at level, unless a line went less than
// every ago.
func (r *rareLog) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Before(r.next) {
		r.held++
		r.mu.Unlock()
		return
	}
	r.next = now.Add(r.every)
	held := r.held
	r.held = 0
	r.mu.Unlock()
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	l.Log(context.Background(), level, msg, args...)
}
