package etcdkv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
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
		Watcher: Watcher{Keys: []string{"/s/"}, Prefix: true, Decode: value, Logf: log.Logf, OnCurrent: func(current bool) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, current)
		}},
	}
	q := startWatcher(t, src)
	if b := next(t, q); b.Cause != flow.CauseInitial || len(b.Changes) != 1 {
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
		if b.Cause != flow.CauseChange || len(b.Changes) != 1 || b.Changes[0].ID != "/s/b" || b.Rev != rev {
			t.Fatalf("after the silence: %+v, want /s/b at rev %d as a change", b, rev)
		}
		break
	}
	t.Logf("recovered %v after the connection went silent", time.Since(silent).Round(time.Millisecond))
	// The log holds the recovery once the change came: it is said before
	// the batch is handed over.
	text := log.String()
	lost := "lost etcd at " + fwd.Addr() + " (no answer for "
	if !strings.Contains(text, lost) || !strings.Contains(text, "the connection went silent") || !strings.Contains(text, "recovered etcd at ") {
		t.Errorf("the loss and the recovery are not both logged:\n%s", text)
	}
	if n, m := strings.Count(text, "lost etcd"), strings.Count(text, "recovered etcd"); n != 1 || m != 1 {
		t.Errorf("%d loss and %d recovery lines, want 1 each:\n%s", n, m, text)
	}
}

// TestWatcherQuietEtcd: a watch opened while nothing is written to etcd
// starts at the next revision, where etcd answers no progress request
// (it is in sync at once: no 100 ms of catching up). It still proves
// itself current, at the revision it listed, for twice the keepalive
// deadline: no silence, no restart. Then a change comes as usual, and
// so do etcd's own progress answers.
func TestWatcherQuietEtcd(t *testing.T) {
	t.Parallel()
	url, c := etcdtest.StartWith(t, "/q/a", "1")
	log := &testkit.Buffer{}
	var stale atomic.Int32
	ka := dial.Keepalive{Time: 500 * time.Millisecond, Timeout: 3 * time.Second}
	src := &Source{
		Config: Config{Endpoints: []string{url}, Keepalive: ka},
		Watcher: Watcher{Keys: []string{"/q/"}, Prefix: true, Decode: value, Logf: log.Logf, ConfirmEvery: 200 * time.Millisecond,
			OnCurrent: func(current bool) {
				if !current {
					stale.Add(1)
				}
			}},
	}
	q := startWatcher(t, src)
	b := next(t, q)
	if b.Cause != flow.CauseInitial || len(b.Changes) != 1 {
		t.Fatalf("initial batch: %+v", b)
	}
	listed := b.Rev
	confirmations := func(d time.Duration) (n int) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		for {
			b, err := q.Next(ctx)
			if err != nil {
				return n
			}
			if len(b.Changes) > 0 || !b.Confirmed {
				t.Fatalf("while etcd was quiet: %+v", b)
			}
			if b.Rev != listed {
				t.Fatalf("confirmed at rev %d, want %d (etcd's)", b.Rev, listed)
			}
			n++
		}
	}
	n := confirmations(2 * (ka.Time + ka.Timeout))
	if n < 2 || stale.Load() != 0 || strings.Contains(log.String(), "silent") {
		t.Fatalf("%d confirmations, %d times not current, in twice the keepalive deadline of a quiet etcd; log:\n%s", n, stale.Load(), log)
	}
	rev := etcdtest.Put(t, c, "/q/b", "2")
	if b := next(t, q); len(b.Changes) != 1 || b.Changes[0].ID != "/q/b" || b.Rev != rev {
		t.Fatalf("after the quiet: %+v, want /q/b at rev %d", b, rev)
	}
	etcdtest.Put(t, c, "/elsewhere", "x") // not watched: a progress answer confirms it
	testkit.Eventually(t, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b, err := q.Next(ctx)
		if err != nil || !b.Confirmed || b.Rev != rev+1 {
			return fmt.Errorf("no confirmation at rev %d yet (%+v, %v)", rev+1, b, err)
		}
		return nil
	})
}

// TestWatcherConfirms: over a random history of changes to two watched
// prefixes, writes elsewhere, quiet spells (in which the watch is
// confirmed by etcd's progress answers or, while it starts after etcd's
// revision, by etcd's revision) and broken connections, every batch
// confirmed at a revision finds the watcher's view equal to etcd's state
// at that revision, which etcd has reached, and the confirmed revisions
// never go backwards; no change comes twice.
func TestWatcherConfirms(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	ep, c := etcdtest.StartWith(t)
	proxy := etcdtest.NewProxy(t, ep)
	pc := etcdtest.Client(t, proxy.Endpoint)
	w := &Watcher{Client: pc, Keys: []string{"/c/a/", "/c/b/"}, Prefix: true, Decode: value,
		MaxBackoff: 200 * time.Millisecond, ConfirmEvery: 50 * time.Millisecond,
		Keepalive: dial.Keepalive{Time: 200 * time.Millisecond, Timeout: time.Minute}}
	q := startWatcher(t, w)
	var mu sync.Mutex
	puts := map[string][]int64{} // each watched key's revisions
	var batches []flow.Batch
	var problems []string // the reader's, which outlives the test
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := q.Next(context.Background())
			if err != nil {
				return
			}
			b.Changes = slices.Clone(b.Changes)
			var problem string
			if b.Confirmed {
				// etcd is at least at the revision confirmed.
				if resp, err := c.Get(context.Background(), "/elsewhere"); err == nil && resp.Header.Revision < b.Rev {
					problem = fmt.Sprintf("confirmed at rev %d; etcd is at %d", b.Rev, resp.Header.Revision)
				}
			}
			mu.Lock()
			batches = append(batches, b)
			if problem != "" {
				problems = append(problems, problem)
			}
			mu.Unlock()
		}
	}()
	keys := []string{"/c/a/1", "/c/a/2", "/c/a/3", "/c/b/1", "/c/b/2"}
	var last int64
	for range 60 {
		switch p := rng.IntN(100); {
		case p < 35:
			k := keys[rng.IntN(len(keys))]
			rev := etcdtest.Put(t, c, k, fmt.Sprint(rng.IntN(100)))
			mu.Lock()
			puts[k] = append(puts[k], rev)
			mu.Unlock()
			last = rev
		case p < 45:
			etcdtest.Put(t, c, "/elsewhere", "x")
		case p < 80:
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		default:
			// A new stream; if nothing is written before the next
			// change, it starts after etcd's revision.
			proxy.Cut()
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
			proxy.Restore()
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
	}
	// Wait for the last change, and a confirmation at or after it.
	testkit.Eventually(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range batches {
			if b.Confirmed && b.Rev >= last {
				return nil
			}
		}
		return fmt.Errorf("no confirmation at rev %d or later yet", last)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	view := map[string]int64{}
	var confirmed int64
	for i, b := range batches {
		for _, ch := range b.Changes {
			// Each key's changes come once each, in order, and are
			// changes made to it (the hand-off may merge a key's
			// changes into its last).
			if ch.Rev <= view[ch.ID] || !slices.Contains(puts[ch.ID], ch.Rev) {
				t.Fatalf("batch %d: %s at rev %d, after rev %d; its changes were at %v", i, ch.ID, ch.Rev, view[ch.ID], puts[ch.ID])
			}
			view[ch.ID] = ch.Rev
		}
		if !b.Confirmed {
			continue
		}
		if b.Rev < confirmed {
			t.Fatalf("batch %d confirmed at rev %d after %d", i, b.Rev, confirmed)
		}
		confirmed = b.Rev
		for _, k := range keys {
			var want int64 // the key's revision at b.Rev
			for _, r := range puts[k] {
				if r <= b.Rev {
					want = r
				}
			}
			if view[k] != want {
				t.Fatalf("batch %d confirmed at rev %d: %s at rev %d in the view, %d in etcd", i, b.Rev, k, view[k], want)
			}
		}
	}
}
