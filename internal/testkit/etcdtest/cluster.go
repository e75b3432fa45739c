package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Cluster is a real multi-member etcd cluster, all members embedded in
// the test process, for tests where failover is the point.
type Cluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string

	t       testing.TB
	configs []embedetcd.Config
	mu      sync.Mutex // guards servers
	servers []*embedetcd.Server
}

// StartCluster starts an n-member cluster that lives as long as the test.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, servers: make([]*embedetcd.Server, n)}
	// A killed member restarts on its own addresses, which must still be
	// free then. On 127.0.0.1 the kernel hands its ports to anyone asking
	// for a free one (other tests, outgoing connections); a loopback
	// address of the cluster's own keeps them out.
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	free := func() string {
		addr, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	var initial []string
	for i := 0; i < n; i++ {
		client, peer := free(), free()
		name := "m" + string(rune('0'+i))
		c.configs = append(c.configs, embedetcd.Config{Dir: t.TempDir(), ClientAddr: client, PeerAddr: peer, Name: name})
		c.Endpoints = append(c.Endpoints, "http://"+client)
		initial = append(initial, name+"=http://"+peer)
	}
	errs := make(chan error, n)
	for i := range c.configs {
		c.configs[i].InitialCluster = strings.Join(initial, ",")
		go func(i int) { errs <- c.start(i) }(i)
	}
	for range c.configs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.servers {
			c.Kill(i)
		}
	})
	return c
}

func (c *Cluster) start(i int) error {
	s, err := embedetcd.Start(c.configs[i])
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[i] = s
	return nil
}

// Kill stops member i as a crash would (a no-op if it is stopped). It
// takes up to etcd's request timeout (~7s) while clients hold watches on
// the member: etcd gives open streams that long to finish.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Kill()
	}
}

// Restart starts member i again on its data and addresses; the other
// members must have a quorum. An address still in use (the killed member's
// sockets closing, a stranger) is tried again for up to testkit.Timeout.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	err := testkit.Poll(context.Background(), testkit.Timeout, func() (bool, error) {
		err := c.start(i)
		return !errors.Is(err, syscall.EADDRINUSE), err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}
