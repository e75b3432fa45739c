package etcdkv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestSourceRefusedSaysSoAtOnce: an etcd that refuses connections is
// said to once, within a second, while the Source tries it until the
// dial timeout (before, nothing was said until then); every failed
// connection goes to Debugf only.
func TestSourceRefusedSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	const dialTimeout = 3 * time.Second
	l := testkit.Listen(t)
	dead := l.Addr().String()
	l.Close()
	var log, debug testkit.Buffer
	src := &Source{
		Config:  Config{Endpoints: []string{dead}, DialTimeout: dialTimeout},
		Watcher: Watcher{Keys: []string{"/x"}, Decode: value, Logf: log.Logf, Debugf: debug.Logf},
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- src.Run(context.Background(), nil) }()
	testkit.Eventually(t, func() error {
		if log.String() == "" {
			return errors.New("no line yet")
		}
		return nil
	})
	if took := time.Since(start); took > time.Second {
		t.Errorf("the line came %v after the start, want within a second", took)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(testkit.Timeout):
		t.Fatalf("Run did not return within %v", testkit.Timeout)
	}
	if !errors.Is(err, ErrUnavailable) || time.Since(start) < dialTimeout {
		t.Errorf("Run = %v after %v, want ErrUnavailable after %v", err, time.Since(start), dialTimeout)
	}
	if want := "cannot reach etcd at " + dead + " (connection refused); retrying for up to 3s\n"; log.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", log.String(), want)
	}
	if n := strings.Count(debug.String(), "etcd at "+dead+": attempt "); n < 2 {
		t.Errorf("%d failed connections on Debugf, want several:\n%s", n, debug.String())
	}
}
