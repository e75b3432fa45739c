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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
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

// roundTrip sends a line on c and reports whether it came back within wait.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, wait time.Duration) bool {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	line, err := r.ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return line == "ping\n"
}

func dial(t *testing.T, f *Forwarder) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestForwarderSilence(t *testing.T) {
	f, err := Listen("127.0.0.1", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old, oldR := dial(t, f)
	if !roundTrip(t, old, oldR, testkit.Timeout) {
		t.Fatal("no echo before the fault")
	}
	f.Silence()
	if roundTrip(t, old, oldR, testkit.Quiet) {
		t.Fatal("a silenced connection carried bytes")
	}
	// Nothing was closed: writes still succeed, and a new connection works.
	if _, err := old.Write([]byte("more\n")); err != nil {
		t.Fatalf("a silenced connection was closed: %v", err)
	}
	fresh, freshR := dial(t, f)
	if !roundTrip(t, fresh, freshR, testkit.Timeout) {
		t.Fatal("a new connection after Silence carried nothing")
	}
}

func TestForwarderBlockHeal(t *testing.T) {
	f, err := Listen("127.0.0.1", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Block()
	blocked, blockedR := dial(t, f)
	if roundTrip(t, blocked, blockedR, testkit.Quiet) {
		t.Fatal("a connection made while blocked carried bytes")
	}
	f.Heal()
	if roundTrip(t, blocked, blockedR, testkit.Quiet) {
		t.Fatal("a connection silenced while blocked came back after Heal")
	}
	fresh, freshR := dial(t, f)
	if !roundTrip(t, fresh, freshR, testkit.Timeout) {
		t.Fatal("a new connection after Heal carried nothing")
	}
	f.Cut()
	fresh.SetReadDeadline(time.Now().Add(testkit.Timeout))
	if _, err := freshR.ReadString('\n'); err == nil {
		t.Fatal("Cut left a connection open")
	}
}

func TestForwarderHoldRelease(t *testing.T) {
	f, err := Listen("127.0.0.1", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open, openR := dial(t, f)
	if !roundTrip(t, open, openR, testkit.Timeout) {
		t.Fatal("no echo before the fault")
	}
	f.Hold()
	open.SetReadDeadline(time.Now().Add(testkit.Timeout))
	if _, err := openR.ReadString('\n'); err == nil {
		t.Fatal("Hold left a connection open")
	}
	held, heldR := dial(t, f)
	if roundTrip(t, held, heldR, testkit.Quiet) {
		t.Fatal("a connection made while held carried bytes")
	}
	f.Release()
	// The echo that comes first is that of the ping sent while held.
	if !roundTrip(t, held, heldR, testkit.Timeout) {
		t.Fatal("a connection held was not forwarded after Release")
	}
}
