package etcdkv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/nodeset"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// fastKeepalive gives a silent connection up within 2s of its last byte,
// so that the tests below do not wait the defaults' 8s.
var fastKeepalive = dial.Keepalive{Time: time.Second, Timeout: time.Second}

// TestWatcherSilentConnection: a watch whose connection goes silent (no
// FIN, no RST: every byte dropped) notices, closes the connection, watches
// again over a new one from the last revision + 1, and gets the next
// change; the loss and the recovery are each logged once. Before
// liveness, the watch waited for ever: the change never came.
func TestWatcherSilentConnection(t *testing.T) {
	ep := etcdtest.Start(t)
	fwd := netfault.Start(t, ep)
	c := etcdtest.Client(t, ep)
	etcdtest.Put(t, c, "/s/a", "1")
	log := &testkit.Buffer{}
	var mu sync.Mutex
	var states []bool
	src := &Source{
		Config: Config{Endpoints: []string{"http://" + fwd.Addr()}, Keepalive: fastKeepalive},
		Watcher: Watcher{Key: "/s/", Prefix: true, Decode: value, Logf: log.Logf, OnCurrent: func(current bool) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, current)
		}},
	}
	q := startWatcher(t, src)
	if b := next(t, q); b.Cause != nodeset.CauseInitial || len(b.Changes) != 1 {
		t.Fatalf("initial batch: %+v", b)
	}
	fwd.Silence()
	silent := time.Now()
	rev := etcdtest.Put(t, c, "/s/b", "2")
	// Bounded generously: the time to recover is a figure, not an assertion.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	for {
		b, err := q.Next(ctx2)
		if err != nil {
			t.Fatalf("the change made after the connection went silent never came (%v); log:\n%s", err, log)
		}
		if len(b.Changes) == 0 {
			continue
		}
		if b.Cause != nodeset.CauseChange || len(b.Changes) != 1 || b.Changes[0].ID != "/s/b" || b.Rev != rev {
			t.Fatalf("after the silence: %+v, want /s/b at rev %d as a change", b, rev)
		}
		break
	}
	t.Logf("recovered %v after the connection went silent", time.Since(silent).Round(time.Millisecond))
	text := log.String()
	if !strings.Contains(text, "the connection went silent") || !strings.Contains(text, "current again via etcd at") {
		t.Errorf("the loss and the recovery are not both logged:\n%s", text)
	}
	if n := strings.Count(text, "current again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, text)
	}
}
