//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/sim"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// KeyPrefix is where the workload's keys live; Key(i) names them.
const KeyPrefix = "/f/"

// Key returns the name of the workload's key number i.
func Key(i int) string { return fmt.Sprintf("%s%04d", KeyPrefix, i) }

// HotKey is the key the workload writes most often: the one `key KEY`
// follows; it is Key(42).
const HotKey = KeyPrefix + "0042"

// Workload writes at random, from a seed: puts, deletes and multi-key
// transactions over Keys keys under KeyPrefix (values JSON, text or
// binary), and node records under /nodes/ through the fleet simulator. A
// write that fails (a member killed, no leader yet) is tried again until it
// succeeds or the run ends, so faults slow it down but do not stop it.
type Workload struct {
	c    *clientv3.Client
	rng  *rand.Rand
	sim  *sim.Sim
	keys int

	mu        sync.Mutex // guards writes, keyWrites and failures
	writes    int64      // writes etcd acknowledged
	keyWrites int64      // those that wrote under KeyPrefix
	failures  int64      // attempts that failed (and were tried again)
}

// NewWorkload returns a workload over keys keys and a fleet of nodes
// nodes, writing through c.
func NewWorkload(c *clientv3.Client, seed uint64, keys, nodes int) *Workload {
	return &Workload{
		c:    c,
		rng:  rand.New(rand.NewPCG(seed, 0xfa17)),
		sim:  sim.New(sim.Config{Nodes: nodes, Seed: int64(seed)}),
		keys: keys,
	}
}

// Populate writes the initial state: every other key, and the fleet.
func (w *Workload) Populate(ctx context.Context) error {
	var ops []clientv3.Op
	for i := 0; i < w.keys; i += 2 {
		ops = append(ops, clientv3.OpPut(Key(i), string(w.value())))
		if len(ops) == 100 || i+2 >= w.keys {
			if _, err := w.c.Txn(ctx).Then(ops...).Commit(); err != nil {
				return fmt.Errorf("populate %s: %w", KeyPrefix, err)
			}
			ops = ops[:0]
		}
	}
	return w.sim.Populate(ctx, w.c)
}

// Run writes about rate times per second until ctx ends, then returns
// nil; it returns early only when ctx ends.
func (w *Workload) Run(ctx context.Context, rate float64) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		write, keys := w.next()
		for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			err := write(wctx)
			cancel()
			if err == nil {
				break
			}
			w.mu.Lock()
			w.failures++
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
		}
		w.mu.Lock()
		w.writes++
		if keys {
			w.keyWrites++
		}
		w.mu.Unlock()
	}
}

// next picks the next write at random; keys says whether it writes under
// KeyPrefix. The write may be called again after it failed.
func (w *Workload) next() (write func(context.Context) error, keys bool) {
	switch p := w.rng.IntN(100); {
	case p < 10:
		return w.put(HotKey), true
	case p < 45:
		return w.put(Key(w.rng.IntN(w.keys))), true
	case p < 58:
		k := Key(w.rng.IntN(w.keys))
		return func(ctx context.Context) error {
			_, err := w.c.Delete(ctx, k)
			return err
		}, true
	case p < 75:
		var ops []clientv3.Op
		for _, i := range w.rng.Perm(w.keys)[:2+w.rng.IntN(5)] {
			if w.rng.IntN(4) == 0 {
				ops = append(ops, clientv3.OpDelete(Key(i)))
			} else {
				ops = append(ops, clientv3.OpPut(Key(i), string(w.value())))
			}
		}
		return func(ctx context.Context) error {
			_, err := w.c.Txn(ctx).Then(ops...).Commit()
			return err
		}, true
	}
	// The simulator keeps its own random state and makes the same change
	// again after a failed Step.
	return func(ctx context.Context) error {
		_, err := w.sim.Step(ctx, w.c)
		return err
	}, false
}

func (w *Workload) put(k string) func(context.Context) error {
	v := string(w.value())
	return func(ctx context.Context) error {
		_, err := w.c.Put(ctx, k, v)
		return err
	}
}

// value returns a random value: mostly JSON, some text, some bytes that
// are not UTF-8 (printed as {"base64": …}).
func (w *Workload) value() []byte {
	n := w.rng.IntN(1_000_000)
	switch w.rng.IntN(10) {
	case 0:
		return []byte{0xff, byte(n), byte(n >> 8), 0xfe}
	case 1, 2, 3:
		return []byte(fmt.Sprintf("text %d", n))
	}
	return []byte(fmt.Sprintf(`{"n":%d,"s":"v%d","nested":{"a":[%d,2.50]}}`, n, n%7, n%13))
}

// Writes returns how many writes etcd acknowledged, and how many of them
// were under KeyPrefix.
func (w *Workload) Writes() (all, keys int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.keyWrites
}

// WaitFailures waits until n more write attempts than counted now failed,
// ctx ends, or d passes; it reports whether they did.
func (w *Workload) WaitFailures(ctx context.Context, n int64, d time.Duration) bool {
	failures := func() int64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.failures
	}
	return w.waitCount(ctx, failures, n, d)
}

// WaitWrites waits until n more writes (keys: under KeyPrefix) than
// counted now are acknowledged, ctx ends, or d passes; it reports whether
// they were.
func (w *Workload) WaitWrites(ctx context.Context, n int64, keys bool, d time.Duration) bool {
	writes := func() int64 {
		all, k := w.Writes()
		if keys {
			return k
		}
		return all
	}
	return w.waitCount(ctx, writes, n, d)
}

// waitCount waits until count has grown by n from now, ctx ends, or d
// passes; it reports whether it did.
func (w *Workload) waitCount(ctx context.Context, count func() int64, n int64, d time.Duration) bool {
	target := count() + n
	return testkit.Poll(ctx, d, func() (bool, error) { return count() >= target, nil }) == nil
}
