package netfault

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	return testkit.Serve(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(line))
		}
	})
}

// conn is a connection through a forwarder to the echo server.
type conn struct {
	net.Conn
	r *bufio.Reader
}

// dial connects to f; the connection is closed when the test ends.
func dial(t *testing.T, f *Forwarder) *conn {
	t.Helper()
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c, bufio.NewReader(c)}
}

// roundTrip sends a line and reports whether it came back within wait.
func (c *conn) roundTrip(t *testing.T, wait time.Duration) bool {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	line, err := c.r.ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return line == "ping\n"
}

// state is what a connection through a forwarder does.
type state int

const (
	carries state = iota // a line sent comes back
	silent               // a line sent is dropped, and nothing is closed
	closed               // it ends
)

// expect fails the test unless c is in state want; which says which
// connection c is.
func (c *conn) expect(t *testing.T, want state, which string) {
	t.Helper()
	switch want {
	case carries:
		if !c.roundTrip(t, testkit.Timeout) {
			t.Fatalf("%s carried nothing", which)
		}
	case silent:
		if c.roundTrip(t, testkit.Quiet) {
			t.Fatalf("%s carried bytes", which)
		}
		if _, err := c.Write([]byte("more\n")); err != nil {
			t.Fatalf("%s was closed: %v", which, err)
		}
	case closed:
		c.SetReadDeadline(time.Now().Add(testkit.Timeout))
		if _, err := c.r.ReadString('\n'); err == nil {
			t.Fatalf("%s is still open", which)
		}
	}
}

// TestForwarderFaults: what each fault does to a connection open before
// it, to one made during it, and to that one once the fault is undone; a
// connection made after that carries bytes again.
func TestForwarderFaults(t *testing.T) {
	for _, tc := range []struct {
		name               string
		fault, undo        func(*Forwarder) // undo may be nil
		open, during, then state
	}{
		{"Silence", (*Forwarder).Silence, nil, silent, carries, carries},
		{"Block, Heal", (*Forwarder).Block, (*Forwarder).Heal, silent, silent, silent},
		{"Hold, Release", (*Forwarder).Hold, (*Forwarder).Release, closed, silent, carries},
		{"Cut", (*Forwarder).Cut, nil, closed, carries, carries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Start(t, echo(t))
			open := dial(t, f)
			open.expect(t, carries, "a connection before the fault")
			tc.fault(f)
			open.expect(t, tc.open, "a connection open before the fault")
			during := dial(t, f)
			during.expect(t, tc.during, "a connection made during the fault")
			if tc.undo != nil {
				tc.undo(f)
			}
			// For a connection held, the echo that comes first is that of
			// the line sent while it was.
			during.expect(t, tc.then, "a connection made during the fault, once undone")
			dial(t, f).expect(t, carries, "a connection made after the fault")
		})
	}
}
