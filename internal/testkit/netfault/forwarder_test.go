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
	l := testkit.Listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return l.Addr().String()
}

// forwarder starts a forwarder to an echo server, closed when the test
// ends.
func forwarder(t *testing.T) *Forwarder {
	t.Helper()
	f, err := Listen("127.0.0.1", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
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

// carries fails the test, saying why, unless a line sent on c comes back.
func (c *conn) carries(t *testing.T, why string) {
	t.Helper()
	if !c.roundTrip(t, testkit.Timeout) {
		t.Fatal(why)
	}
}

// silent fails the test, saying why, if a line sent on c comes back.
func (c *conn) silent(t *testing.T, why string) {
	t.Helper()
	if c.roundTrip(t, testkit.Quiet) {
		t.Fatal(why)
	}
}

// closed fails the test, saying why, unless c ends.
func (c *conn) closed(t *testing.T, why string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testkit.Timeout))
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal(why)
	}
}

func TestForwarderSilence(t *testing.T) {
	f := forwarder(t)
	old := dial(t, f)
	old.carries(t, "no echo before the fault")
	f.Silence()
	old.silent(t, "a silenced connection carried bytes")
	// Nothing was closed: writes still succeed, and a new connection works.
	if _, err := old.Write([]byte("more\n")); err != nil {
		t.Fatalf("a silenced connection was closed: %v", err)
	}
	dial(t, f).carries(t, "a new connection after Silence carried nothing")
}

func TestForwarderBlockHeal(t *testing.T) {
	f := forwarder(t)
	f.Block()
	blocked := dial(t, f)
	blocked.silent(t, "a connection made while blocked carried bytes")
	f.Heal()
	blocked.silent(t, "a connection silenced while blocked came back after Heal")
	fresh := dial(t, f)
	fresh.carries(t, "a new connection after Heal carried nothing")
	f.Cut()
	fresh.closed(t, "Cut left a connection open")
}

func TestForwarderHoldRelease(t *testing.T) {
	f := forwarder(t)
	open := dial(t, f)
	open.carries(t, "no echo before the fault")
	f.Hold()
	open.closed(t, "Hold left a connection open")
	held := dial(t, f)
	held.silent(t, "a connection made while held carried bytes")
	f.Release()
	// The echo that comes first is that of the ping sent while held.
	held.carries(t, "a connection held was not forwarded after Release")
}
