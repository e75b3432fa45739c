package dial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Announce is how long a watch may go at its start without reaching its
// server before Outage says so: an unreachable endpoint is said to be one
// within a second, however long it is then retried.
const Announce = 500 * time.Millisecond

// Outage is what a watch tells the user of its connection (the etcd
// watcher's and the Curator client's alike): one line when it is lost,
// saying why in the user's words (Reason) and where; one line when it
// works again, saying how long the watch was blind and how many attempts
// failed meanwhile. The attempts in between are counted, and said one by
// one only on Debugf (-v). At the start (Begin), a watch that has reached
// no server within Announce says so once, and, if it then does, says so
// once more; one that reaches its server in time says nothing.
//
// The lines, with Server "curator":
//
//	cannot reach curator at ADDR (REASON); retrying for up to 5s
//	reached curator at ADDR after 1.2s (3 attempts failed)
//	lost curator at ADDR (REASON); retrying
//	recovered curator at ADDR after 3.4s blind (7 attempts failed)
//
// Its methods are safe for concurrent use; Up is cheap while nothing is
// lost, so that a watch may call it for everything it hears. The owner
// calls Stop when the watch ends: nothing is logged after Stop returns.
type Outage struct {
	// Server names the server in lines: "etcd", "curator".
	Server string
	// Endpoints names where the server is when no attempt named an
	// endpoint yet.
	Endpoints string
	// Deadline is how long the start is retried, said in its line ("for
	// up to 5s"); 0 says nothing of it.
	Deadline time.Duration
	// Logf says the loss and the recovery; nil discards.
	Logf Logf
	// Debugf says every failed attempt (-v); nil discards.
	Debugf Logf

	troubled atomic.Bool // out: Up has something to do
	mu       sync.Mutex  // guards the fields below, and orders the lines
	timer    *time.Timer // Announce's, at the start
	starting bool        // Begin was called, and Up not yet
	due      bool        // Announce passed at the start
	reached  bool        // at the start: a connection was made since the last failure
	out      bool        // starting, or lost and not yet up again
	said     bool        // the line of the start or of the loss was said
	since    time.Time   // when the watch went blind (the start, or the last word before the loss)
	failed   int         // attempts failed since
	endpoint string      // of the last failure
	last     error       // the last failure; nil: none yet
	stopped  bool
}

// Begin starts the watch: unless Up comes first, the start is said to
// have failed once Announce passed and an attempt failed, or no
// connection was made.
func (o *Outage) Begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	o.starting, o.out, o.since = true, true, time.Now()
	o.troubled.Store(true)
	o.timer = time.AfterFunc(Announce, o.announce)
}

// announce is Announce passing at the start.
func (o *Outage) announce() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || !o.starting {
		return
	}
	o.due = true
	if !o.reached || o.last != nil {
		o.sayStart()
	}
}

// Reached says that a connection was made at the start: a server
// answers, although the watch does not work yet (it may, for a while, say
// nothing). Announce passing then says nothing, unless an attempt fails.
func (o *Outage) Reached() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reached, o.last = true, nil
}

// Retry counts a failed attempt at endpoint (a connection, a watch),
// while the watch starts or is lost; otherwise it says nothing (another
// endpoint may serve the watch). At the start, err is the reason its line
// gives.
func (o *Outage) Retry(endpoint string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retry(endpoint, err)
}

func (o *Outage) retry(endpoint string, err error) {
	if o.stopped || !o.out {
		return
	}
	o.failed++
	o.endpoint, o.last, o.reached = endpoint, err, false
	o.Debugf.Printf("%s at %s: attempt %d failed: %v", o.Server, endpoint, o.failed, err)
	if o.starting && o.due && !o.said {
		o.sayStart()
	}
}

// Lost says that the watch, which worked, lost endpoint with err; it has
// been blind since (the last it heard; zero: now). While the watch starts,
// or is lost already, it is an attempt that failed (Retry).
func (o *Outage) Lost(endpoint string, err error, since time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	if o.out {
		o.retry(endpoint, err)
		return
	}
	if since.IsZero() {
		since = time.Now()
	}
	o.out, o.said, o.since, o.failed, o.endpoint, o.last = true, true, since, 0, endpoint, err
	o.troubled.Store(true)
	why := Reason(err)
	o.Logf.Printf("lost %s at %s (%s); retrying", o.Server, endpoint, why)
	if err != nil && why != err.Error() {
		o.Debugf.Printf("%s at %s: %v", o.Server, endpoint, err)
	}
}

// Up says that the watch works, through endpoint: it ends the start, or
// the loss, and says so if its first line was said.
func (o *Outage) Up(endpoint string) {
	if !o.troubled.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || !o.out {
		return
	}
	if o.said {
		took := time.Since(o.since).Round(time.Millisecond)
		if o.starting {
			o.Logf.Printf("reached %s at %s after %v%s", o.Server, endpoint, took, o.failures())
		} else {
			o.Logf.Printf("recovered %s at %s after %v blind%s", o.Server, endpoint, took, o.failures())
		}
	}
	o.endStart()
	o.out, o.said, o.failed, o.last = false, false, 0, nil
	o.troubled.Store(false)
}

// Stop ends the reports: nothing is said after it returns.
func (o *Outage) Stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	o.endStart()
}

func (o *Outage) endStart() {
	o.starting = false
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
}

// sayStart says that the start has not reached the server yet.
func (o *Outage) sayStart() {
	o.said = true
	where, why := o.endpoint, "no answer yet"
	if where == "" {
		where = o.Endpoints
	}
	if o.last != nil {
		why = Reason(o.last)
	}
	until := ""
	if o.Deadline > 0 {
		until = " for up to " + o.Deadline.String()
	}
	o.Logf.Printf("cannot reach %s at %s (%s); retrying%s", o.Server, where, why, until)
}

// failures says how many attempts failed, for a line that ends an outage.
func (o *Outage) failures() string {
	switch o.failed {
	case 0:
		return ""
	case 1:
		return " (1 attempt failed)"
	}
	return " (" + strconv.Itoa(o.failed) + " attempts failed)"
}

// Logf is where a watch tells the user what it goes through: an Outage's
// Logf and Debugf, and those of the watches that own one (the etcd
// watcher, the Curator client). A line a call, formatted as by
// fmt.Printf. A nil Logf discards, so that an owner that wants nothing
// said sets nothing.
type Logf func(format string, args ...any)

// Printf says a line on f, unless f is nil.
func (f Logf) Printf(format string, args ...any) {
	if f != nil {
		f(format, args...)
	}
}

// Reason says why a connection failed in the user's words: "connection
// refused", "timed out", "no such host NAME", "TLS: …" (the explanation
// of Credentials), "not authorized: …", "the server closed the
// connection", or else the error itself, gRPC's wrapping taken off.
// A nil err is "no answer yet".
func Reason(err error) string {
	var (
		dns *net.DNSError
		ne  net.Error
		te  *tlsError
	)
	switch {
	case err == nil:
		return "no answer yet"
	case errors.As(err, &te):
		return "TLS: " + te.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host " + dns.Name
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name + ": " + dns.Err
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF):
		return "the server closed the connection"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unauthenticated, codes.PermissionDenied:
			return "not authorized: " + st.Message()
		case codes.DeadlineExceeded:
			return "timed out"
		}
		msg = st.Message()
	}
	// gRPC keeps only the text of why a connection failed.
	for _, w := range []struct{ in, say string }{
		{"connection refused", "connection refused"},
		{"produced zero addresses", "cannot resolve the host"},
		{"i/o timeout", "timed out"},
		{"connection reset by peer", "connection reset"},
		{"no route to host", "no route to the host"},
		{"network is unreachable", "no route to the host"},
		{"error reading from server: EOF", "the server closed the connection"},
		{"received prior goaway", "the server closed the connection"},
		{"server closed the stream without sending trailers", "the server closed the connection"},
	} {
		if strings.Contains(msg, w.in) {
			return w.say
		}
	}
	for _, p := range []string{"connection error: desc = ", "transport: ", "authentication handshake failed: ", "Error while dialing: "} {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			if u, err := strconv.Unquote(rest); err == nil {
				rest = u
			}
			msg = rest
		}
	}
	if msg == "EOF" || strings.HasSuffix(msg, ": EOF") {
		return "the server closed the connection"
	}
	if strings.Contains(msg, "certificate") || strings.Contains(msg, "x509: ") || strings.Contains(msg, "tls: ") || strings.Contains(msg, " TLS") {
		return "TLS: " + msg
	}
	return msg
}

// tlsError is a failure of TLS, explained (see Credentials.explain).
type tlsError struct{ err error }

func (e *tlsError) Error() string { return e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// tlsFailure marks err, an explained failure of TLS, as one.
func tlsFailure(format string, args ...any) error {
	return &tlsError{fmt.Errorf(format, args...)}
}
