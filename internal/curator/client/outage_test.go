package client

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// waitLines waits until log holds at least n lines, and returns them.
func waitLines(t *testing.T, log *testkit.Buffer, n int) []string {
	t.Helper()
	var lines []string
	testkit.Eventually(t, func() error {
		lines = strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
		if log.String() == "" || len(lines) < n {
			return errors.New("fewer lines than wanted:\n" + log.String())
		}
		return nil
	})
	return lines
}

// matchLines checks that got is a line matching each of want, in order.
func matchLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile(`\A` + want[i] + `\z`).MatchString(got[i])
	}
	if !ok {
		t.Errorf("lines:\n%s\nwant lines matching:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestClientRefusedSaysSoAtOnce: a Curator that refuses connections is
// said to once, within a second, while Run tries it until DialTimeout;
// every failed attempt goes to Debugf only.
func TestClientRefusedSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	const dialTimeout = 3 * time.Second
	dead := deadAddr(t)
	var log, debug testkit.Buffer
	c := &Client{Endpoints: []string{dead}, Logf: log.Logf, Debugf: debug.Logf, DialTimeout: dialTimeout, MaxBackoff: 200 * time.Millisecond}
	start := time.Now()
	r := startClient(t, c)
	waitLines(t, &log, 1)
	if took := time.Since(start); took > time.Second {
		t.Errorf("the line came %v after the start, want within a second", took)
	}
	err := r.wait()
	if !errors.Is(err, ErrUnavailable) || time.Since(start) < dialTimeout {
		t.Errorf("Run = %v after %v, want ErrUnavailable after %v", err, time.Since(start), dialTimeout)
	}
	matchLines(t, waitLines(t, &log, 1), regexp.QuoteMeta("cannot reach curator at "+dead+" (connection refused); retrying for up to 3s"))
	if n := strings.Count(debug.String(), "curator at "+dead+": attempt "); n < 2 {
		t.Errorf("%d failed attempts on Debugf, want several:\n%s", n, debug.String())
	}
}

// TestClientRestartSaysLossAndRecovery: a server that goes away and
// comes back on the same address is one line when it goes, one when the
// watch works again, however many attempts failed in between.
func TestClientRestartSaysLossAndRecovery(t *testing.T) {
	t.Parallel()
	s := serveNodes(t, curatortest.Node("a", up, "1"))
	var log, debug testkit.Buffer
	c := s.client()
	c.Logf, c.Debugf = log.Logf, debug.Logf
	r := startClient(t, c)
	if b := r.next(); b.Cause != flow.CauseInitial {
		t.Fatalf("first batch: %+v", b)
	}
	if log.String() != "" {
		t.Fatalf("lines before anything was lost:\n%s", log.String())
	}
	s.g.Stop()
	waitLines(t, &log, 1)
	// An attempt fails while the address is closed.
	testkit.Eventually(t, func() error {
		if !strings.Contains(debug.String(), "attempt 1 failed") {
			return errors.New("no failed attempt yet:\n" + debug.String())
		}
		return nil
	})
	serveReady(t, s.g.Addr, server.Config{Etcd: s.st.Etcd, Log: s.lg.Logger()})
	if b := r.next(); b.Cause != flow.CauseResync {
		t.Fatalf("batch after the restart: %+v", b)
	}
	addr := regexp.QuoteMeta(s.g.Addr)
	matchLines(t, waitLines(t, &log, 2),
		`lost curator at `+addr+` \(.+\); retrying`,
		`recovered curator at `+addr+` after [0-9.]+m?s blind \([0-9]+ attempts? failed\)`)
}

// TestClientStartReachedQuietly: a Curator reached within dial.Announce
// says nothing, also for one node, whose first batch waits for Settle.
func TestClientStartReachedQuietly(t *testing.T) {
	t.Parallel()
	s := serveNodes(t)
	var log testkit.Buffer
	c := s.client()
	c.Logf, c.Debugf, c.NodeID, c.Settle = log.Logf, log.Logf, "missing", 2*dial.Announce
	r := startClient(t, c)
	if b := r.next(); b.Cause != flow.CauseInitial {
		t.Fatalf("first batch: %+v", b)
	}
	r.none()
	if log.String() != "" {
		t.Errorf("lines for a Curator reached at once:\n%s", log.String())
	}
}
