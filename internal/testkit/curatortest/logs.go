package curatortest

import (
	"fmt"
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
