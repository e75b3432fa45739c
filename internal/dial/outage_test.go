package dial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

func TestReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "no answer yet"},
		{refused, "connection refused"},
		{fmt.Errorf("list: %w", refused), "connection refused"},
		{&net.DNSError{Name: "etcd.invalid", Err: "no such host", IsNotFound: true}, "no such host etcd.invalid"},
		{context.DeadlineExceeded, "timed out"},
		{io.EOF, "the server closed the connection"},
		{status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: EOF"`), "the server closed the connection"},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "timed out"},
		{status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), "connection refused"},
		{status.Error(codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "graceful_stop"`), "the server closed the connection"},
		{status.Error(codes.Unavailable, `name resolver error: produced zero addresses`), "cannot resolve the host"},
		{status.Error(codes.Unavailable, "this replica is shutting down; try another"), "this replica is shutting down; try another"},
		{status.Error(codes.Unauthenticated, "invalid auth token"), "not authorized: invalid auth token"},
		{status.Error(codes.PermissionDenied, "permission denied"), "not authorized: permission denied"},
		{status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: the server's certificate (CN=n, issued by CN=ca) is not signed by the CA in ca.pem"`),
			"TLS: the server's certificate (CN=n, issued by CN=ca) is not signed by the CA in ca.pem"},
		{tlsFailure("the certificate of %s expired at %s", "h:1", "2026-01-02T03:04:05Z"), "TLS: the certificate of h:1 expired at 2026-01-02T03:04:05Z"},
		{errors.New("no answer for 8s, not even to a probe: the connection went silent"), "no answer for 8s, not even to a probe: the connection went silent"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// outageLog is an Outage's two outputs.
type outageLog struct{ log, debug testkit.Buffer }

func newOutage(l *outageLog) *Outage {
	return &Outage{Server: "etcd", Endpoints: "a:1,b:2", Deadline: 5 * time.Second, Logf: l.log.Logf, Debugf: l.debug.Logf}
}

// begun returns a new Outage that has begun, stopped when the test ends,
// and its outputs.
func begun(t *testing.T) (*Outage, *outageLog) {
	l := new(outageLog)
	o := newOutage(l)
	t.Cleanup(o.Stop)
	o.Begin()
	return o, l
}

// waitLog waits until b holds a line matching re.
func waitLog(t *testing.T, b *testkit.Buffer, re string) {
	t.Helper()
	r := regexp.MustCompile(`(?m)^` + re + `$`)
	testkit.Eventually(t, func() error {
		if !r.MatchString(b.String()) {
			return fmt.Errorf("no line matching %s in:\n%s", re, b.String())
		}
		return nil
	})
}

// lines returns the lines b holds.
func lines(b *testkit.Buffer) []string {
	if b.String() == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func TestOutageStart(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

	t.Run("a failed attempt, then reached", func(t *testing.T) {
		t.Parallel()
		o, l := begun(t)
		o.Retry("a:1", refused)
		waitLog(t, &l.log, regexp.QuoteMeta("cannot reach etcd at a:1 (connection refused); retrying for up to 5s"))
		o.Retry("b:2", refused)
		o.Up("b:2")
		o.Up("b:2")
		waitLog(t, &l.log, `reached etcd at b:2 after [0-9.]+m?s \(2 attempts failed\)`)
		if n := len(lines(&l.log)); n != 2 {
			t.Errorf("%d lines, want 2:\n%s", n, l.log.String())
		}
		if n := len(lines(&l.debug)); n != 2 {
			t.Errorf("%d debug lines, want one per failed attempt:\n%s", n, l.debug.String())
		}
	})

	t.Run("no answer at all", func(t *testing.T) {
		t.Parallel()
		_, l := begun(t)
		waitLog(t, &l.log, regexp.QuoteMeta("cannot reach etcd at a:1,b:2 (no answer yet); retrying for up to 5s"))
	})

	t.Run("reached in time", func(t *testing.T) {
		t.Parallel()
		o, l := begun(t)
		o.Reached() // the watch itself takes longer
		time.AfterFunc(2*Announce, func() { o.Up("a:1") })
		// Up ends the start: the Announce timer is stopped, or found it over.
		testkit.Eventually(t, func() error {
			if o.troubled.Load() {
				return errors.New("not up yet")
			}
			return nil
		})
		o.Stop()
		if l.log.String() != "" {
			t.Errorf("lines for a server reached in time:\n%s", l.log.String())
		}
	})
}

func TestOutageLoss(t *testing.T) {
	t.Parallel()
	var l outageLog
	o := newOutage(&l)
	o.Retry("a:1", errors.New("a member is down")) // nothing is lost: another serves
	o.Up("a:1")
	o.Lost("a:1", status.Error(codes.Unavailable, "error reading from server: EOF"), time.Now().Add(-time.Second))
	o.Retry("a:1", errors.New("refused"))
	o.Lost("b:2", errors.New("the watch failed again"), time.Time{})
	o.Up("b:2")
	o.Up("b:2")
	o.Stop()
	o.Lost("a:1", errors.New("after Stop"), time.Time{})
	got := lines(&l.log)
	want := []string{
		regexp.QuoteMeta("lost etcd at a:1 (the server closed the connection); retrying"),
		`recovered etcd at b:2 after 1(\.[0-9]+)?s blind \(2 attempts failed\)`,
	}
	if len(got) != len(want) {
		t.Fatalf("lines:\n%s\nwant %d", l.log.String(), len(want))
	}
	for i, re := range want {
		if !regexp.MustCompile(`\A` + re + `\z`).MatchString(got[i]) {
			t.Errorf("line %d = %q, want one matching %s", i, got[i], re)
		}
	}
	if d := l.debug.String(); !strings.Contains(d, "etcd at a:1: attempt 1 failed: refused") || !strings.Contains(d, "etcd at b:2: attempt 2 failed: the watch failed again") {
		t.Errorf("debug lines:\n%s", d)
	}
}
