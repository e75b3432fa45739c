package curatortest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Logs records log lines and lets a test wait for one.
type Logs struct {
	t     *testing.T
	mu    sync.Mutex // guards lines
	lines []string
}

func NewLogs(t *testing.T) *Logs { return &Logs{t: t} }

func (l *Logs) Logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// Logger returns a logger (at debug level) whose lines l records as
// "LEVEL msg key=value …", values unquoted, so that WaitFor finds them
// by what they say.
func (l *Logs) Logger() *slog.Logger { return slog.New(&logsHandler{l: l}) }

type logsHandler struct {
	l     *Logs
	attrs []slog.Attr
}

func (h *logsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logsHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.l.Logf("%s", b.String())
	return nil
}

func (h *logsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logsHandler{l: h.l, attrs: append(slices.Clip(h.attrs), attrs...)}
}

func (h *logsHandler) WithGroup(string) slog.Handler { return h }

// WaitFor waits until a line containing every one of subs was logged and
// returns it.
func (l *Logs) WaitFor(subs ...string) string {
	l.t.Helper()
	var line string
	testkit.Eventually(l.t, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.IndexFunc(l.lines, func(line string) bool {
			for _, s := range subs {
				if !strings.Contains(line, s) {
					return false
				}
			}
			return true
		})
		if i < 0 {
			return fmt.Errorf("no log line containing %q", subs)
		}
		line = l.lines[i]
		return nil
	})
	return line
}
