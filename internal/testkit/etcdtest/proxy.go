package etcdtest

import (
	"testing"

	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// Proxy forwards TCP connections from a loopback address to an etcd
// client URL. Cut closes every connection, and connections made after it
// are held, unanswered, until Restore forwards them: what a network
// partition that drops packets looks like to a client. A client that
// reconnects while cut gets through as soon as Restore is called, not at
// its next attempt after a backoff that grew with the length of the cut
// (which depends on how loaded the machine is).
type Proxy struct {
	// Endpoint is the URL clients should dial instead of the target.
	Endpoint string

	f *netfault.Forwarder
}

// NewProxy starts a proxy in front of endpoint (http://host:port); it is
// closed when the test ends.
func NewProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	f := netfault.Start(t, endpoint)
	return &Proxy{Endpoint: "http://" + f.Addr(), f: f}
}

// Cut closes all proxied connections, and those held, and holds new ones.
func (p *Proxy) Cut() { p.f.Hold() }

// Restore forwards the connections held since Cut, and new ones.
func (p *Proxy) Restore() { p.f.Release() }
