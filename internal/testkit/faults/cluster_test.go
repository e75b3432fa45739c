//go:build linux

package faults

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

func TestMain(m *testing.M) {
	MemberMain()
	os.Exit(m.Run())
}

// TestIsolate: a member cut off from its peers loses its leader while the
// other two keep one, and finds it again once reconnected.
func TestIsolate(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(exe, t.TempDir(), "127.0.0.1", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Elections take a few seconds: three times the tree's timeout.
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := testkit.Poll(ctx, 3*testkit.Timeout, func() (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v (links open %v, unknown dialers %d)", what, err, c.peers.open(), c.peers.Unknown())
		}
	}
	for i := range 3 {
		poll(fmt.Sprintf("m%d has a leader", i), func() bool { return c.HasLeader(ctx, i) })
	}
	t.Logf("links open: %v", c.peers.open())
	c.Isolate(0)
	poll("m0 has no leader", func() bool { return !c.HasLeader(ctx, 0) })
	poll("m1 and m2 have a leader", func() bool { return c.HasLeader(ctx, 1) && c.HasLeader(ctx, 2) })
	if c.HasLeader(ctx, 0) {
		t.Fatalf("m0 has a leader while cut off (links open %v)", c.peers.open())
	}
	c.Reconnect()
	poll("m0 has a leader again", func() bool { return c.HasLeader(ctx, 0) })
}
