package etcdkv

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/view"
)

func TestFollowed(t *testing.T) {
	for _, c := range []struct {
		keys   []string
		prefix bool
		want   []string
	}{
		{[]string{"/a"}, false, []string{"/a"}},
		{[]string{"/a", "/a"}, false, []string{"/a"}},
		{[]string{"/b", "/a", "/a/b", "/b"}, false, []string{"/a", "/a/b", "/b"}},
		{[]string{"/a/", "/a/b/"}, true, []string{"/a/"}},
		{[]string{"/a/b/", "/a/"}, true, []string{"/a/"}},
		{[]string{"/a/", "/a0", "/a/b", "/b"}, true, []string{"/a/", "/a0", "/b"}},
		{[]string{"/a", "/a/", "/ab", "/b"}, true, []string{"/a", "/b"}},
		{[]string{"/e/h3/", "/e/*/"}, true, []string{"/e/*/", "/e/h3/"}},
		{[]string{"/x", "", "/a/"}, true, []string{""}},
		{[]string{"\xff", "\xff\xff", "\xfe"}, true, []string{"\xfe", "\xff"}},
	} {
		in := slices.Clone(c.keys)
		if got := Followed(c.keys, c.prefix); !cmp.Equal(c.want, got) {
			t.Errorf("Followed(%q, %v) = %q, want %q", c.keys, c.prefix, got, c.want)
		}
		if !cmp.Equal(in, c.keys) {
			t.Errorf("Followed changed its argument: %q, was %q", c.keys, in)
		}
	}
}

// keysModel is etcd's state as the test made it, revision by revision:
// the model that a Watcher's listings and view must equal for any keys.
type keysModel struct {
	rev     int64
	states  map[int64]map[string]string // by revision, from the first the test saw
	changed map[int64][]string          // the keys each revision changed
}

// matching returns the state at rev of the keys that keys (prefixes, with
// prefix) select: each key once, whatever overlaps.
func (m *keysModel) matching(rev int64, keys []string, prefix bool) map[string]string {
	out := map[string]string{}
	for k, v := range m.states[rev] {
		if selects(keys, prefix, k) {
			out[k] = v
		}
	}
	return out
}

func selects(keys []string, prefix bool, key string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return key == k || prefix && strings.HasPrefix(key, k) })
}

// step applies one random revision to etcd and to m: a transaction of
// puts and deletes of distinct keys, or a deletion of a prefix.
func (m *keysModel) step(t *testing.T, rng *rand.Rand, c *clientv3.Client, universe []string) {
	t.Helper()
	state := maps.Clone(m.states[m.rev])
	var changed []string
	var at int64 // etcd's revision after the step
	if rng.IntN(8) == 0 {
		p := randomKey(rng, 1, 2)
		resp, err := c.Delete(context.Background(), p, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		at = resp.Header.Revision
		for k := range state {
			if strings.HasPrefix(k, p) {
				delete(state, k)
				changed = append(changed, k)
			}
		}
	} else {
		var ops []clientv3.Op
		for _, i := range rng.Perm(len(universe))[:1+rng.IntN(4)] {
			k := universe[i]
			if _, ok := state[k]; ok && rng.IntN(3) == 0 {
				ops = append(ops, clientv3.OpDelete(k))
				delete(state, k)
				changed = append(changed, k)
				continue
			}
			v := fmt.Sprint(rng.IntN(5)) // the same value again is a change too
			ops = append(ops, clientv3.OpPut(k, v))
			state[k] = v
			changed = append(changed, k)
		}
		resp, err := c.Txn(context.Background()).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		at = resp.Header.Revision
	}
	rev := m.rev
	if len(changed) > 0 {
		rev++
	}
	if at != rev {
		t.Fatalf("etcd is at revision %d, the model at %d", at, rev)
	}
	if len(changed) > 0 {
		m.rev, m.states[rev], m.changed[rev] = rev, state, changed
	}
}

// randomKey is a key of lo to hi characters of "ab/": short, so that
// keys and prefixes overlap often.
func randomKey(rng *rand.Rand, lo, hi int) string {
	var b strings.Builder
	for range lo + rng.IntN(hi-lo+1) {
		b.WriteByte("ab/"[rng.IntN(3)])
	}
	return b.String()
}

// randomKeys are 1 to 4 KEYs, some the same, some inside others.
func randomKeys(rng *rand.Rand, prefix bool) []string {
	short := 1
	if prefix && rng.IntN(6) == 0 {
		short = 0 // "", every key
	}
	keys := []string{randomKey(rng, short, 2)}
	for range rng.IntN(4) {
		switch k := keys[rng.IntN(len(keys))]; rng.IntN(3) {
		case 0:
			keys = append(keys, k)
		case 1:
			keys = append(keys, k+randomKey(rng, 1, 2))
		default:
			keys = append(keys, randomKey(rng, 1, 2))
		}
	}
	return keys
}

// take returns the batches that rec handed on, waiting for the first:
// every batch, unlike a hand-off, which lets a later change of a key
// replace an earlier one.
func take(t *testing.T, rec *recorder) []flow.Batch {
	t.Helper()
	timer := time.NewTimer(testkit.Timeout)
	defer timer.Stop()
	select {
	case b := <-rec.out:
		bs := []flow.Batch{b}
		for {
			select {
			case b := <-rec.out:
				bs = append(bs, b)
			default:
				return bs
			}
		}
	case <-timer.C:
		t.Fatal("no batch")
		return nil
	}
}

// TestWatcherKeysModel: for random sets of keys and of prefixes, which
// repeat and overlap, listings (Run's and List's, the latter page by
// page as --once prints them) and the view that the follower builds from
// Run's batches equal a model of etcd, the keys any of them selects,
// after each revision of random puts and deletes; and every change of a
// selected key comes exactly once, in one batch of its revision, and no
// other.
func TestWatcherKeysModel(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var universe []string
	for n := 1; n <= 3; n++ {
		for i := range 1 << (2 * n) { // 4^n covers 3^n
			if k := keyOf(i, n); k != "" && !slices.Contains(universe, k) {
				universe = append(universe, k)
			}
		}
	}
	resp, err := c.Get(context.Background(), "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	m := &keysModel{rev: resp.Header.Revision, states: map[int64]map[string]string{resp.Header.Revision: {}}, changed: map[int64][]string{}}
	for range 20 {
		m.step(t, rng, c, universe)
	}
	trials := 30
	if testing.Short() {
		trials = 8
	}
	for trial := range trials {
		prefix := trial%2 == 0
		keys := randomKeys(rng, prefix)
		var start int64
		if rng.IntN(4) == 0 {
			start = m.rev - rng.Int64N(10) // --rev: within what the model holds
		}
		t.Run(fmt.Sprintf("%d %q prefix=%v rev=%d", trial, keys, prefix, start), func(t *testing.T) {
			// Each use has a Watcher of its own, as Source's have.
			w := Watcher{Client: c, Keys: keys, Prefix: prefix, PageSize: int64(rng.IntN(3)), Decode: value,
				StartRev: start, ConfirmEvery: 20 * time.Millisecond}
			checkList(t, w, m, keys, prefix)
			checkWatch(t, w, m, keys, prefix, func() { m.step(t, rng, c, universe) })
			w.StartRev = 0
			checkList(t, w, m, keys, prefix)
		})
	}
}

// keyOf is the n characters of "ab/" that i's base-4 digits name, "" for
// a digit 3.
func keyOf(i, n int) string {
	var b strings.Builder
	for range n {
		if i%4 == 3 {
			return ""
		}
		b.WriteByte("ab/"[i%4])
		i /= 4
	}
	return b.String()
}

// checkList checks List, as --once prints it: page by page, in ascending
// key order, each key once, the model's state at its revision.
func checkList(t *testing.T, w Watcher, m *keysModel, keys []string, prefix bool) {
	t.Helper()
	got := map[string]string{}
	var order []string
	rev, err := w.List(context.Background(), func(page []flow.Change) error {
		for _, c := range page {
			order = append(order, c.ID)
			got[c.ID] = c.Object.(string)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(order) || len(slices.Compact(slices.Clone(order))) != len(order) {
		t.Errorf("List at rev %d: keys %q, want ascending, each once", rev, order)
	}
	if w.StartRev != 0 && rev != w.StartRev {
		t.Errorf("List at rev %d, want %d", rev, w.StartRev)
	}
	if diff := cmp.Diff(m.matching(rev, keys, prefix), got); diff != "" {
		t.Errorf("List at rev %d (-model +got):\n%s", rev, diff)
	}
}

// checkWatch runs w: its initial batch (in key order, each key once) and
// the view after it must be the model's at its revision; then, after each
// revision that step makes, once its changes came, the view must be the
// model's; and once the watcher confirms the last, the changes since the
// listing must be exactly the model's, each once, each in a batch of its
// revision.
func checkWatch(t *testing.T, w Watcher, m *keysModel, keys []string, prefix bool, step func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{out: make(chan flow.Batch, 1000)}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, rec) }()
	defer func() {
		cancel()
		<-done
	}()
	f := view.NewFollower(nil, nil)
	apply := func(b flow.Batch) {
		if err := f.Apply(b, func(flow.Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	viewNow := func() map[string]string {
		v := map[string]string{}
		f.Set().Ascend(func(id string, obj any) bool {
			v[id] = obj.(string)
			return true
		})
		return v
	}
	bs := take(t, rec)
	initial := bs[0]
	if initial.Cause != flow.CauseInitial {
		t.Fatalf("first batch: cause %v", initial.Cause)
	}
	listed := initial.Rev
	var ids []string
	for _, c := range initial.Changes {
		ids = append(ids, c.ID)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("initial batch at rev %d: keys %q, want ascending, each once", listed, ids)
	}
	apply(initial)
	if diff := cmp.Diff(m.matching(listed, keys, prefix), viewNow()); diff != "" {
		t.Fatalf("view after the listing at rev %d (-model +got):\n%s", listed, diff)
	}
	type change struct {
		rev int64
		key string
	}
	seen, want := map[change]int{}, map[change]int{}
	changes, confirmed := 0, listed // changes received, and the last revision confirmed
	last := listed                  // the revision of the last batch of changes
	pending := bs[1:]
	// follow applies batches until done says so.
	follow := func(done func() bool) {
		for {
			for _, b := range pending {
				if b.Full() {
					t.Fatalf("a full batch (%v) at rev %d; nothing was compacted", b.Cause, b.Rev)
				}
				for _, c := range b.Changes {
					if c.Rev != b.Rev || c.Rev > m.rev || !selects(keys, prefix, c.ID) {
						t.Fatalf("change %q at rev %d in a batch of rev %d (etcd at %d): not the model's", c.ID, c.Rev, b.Rev, m.rev)
					}
					seen[change{c.Rev, c.ID}]++
					changes++
				}
				apply(b)
				if b.Confirmed {
					confirmed = max(confirmed, b.Rev)
				}
				if len(b.Changes) == 0 {
					continue
				}
				// One batch per revision, in order, and the view after
				// it is etcd's state at its revision.
				if b.Rev <= last {
					t.Fatalf("a batch of rev %d after one of rev %d", b.Rev, last)
				}
				last = b.Rev
				if diff := cmp.Diff(m.matching(b.Rev, keys, prefix), viewNow()); diff != "" {
					t.Fatalf("view after the batch of rev %d (-model +got):\n%s", b.Rev, diff)
				}
			}
			pending = nil
			if done() {
				return
			}
			pending = take(t, rec)
		}
	}
	// Once the changes up to the model's revision came (as many as the
	// model has: more, or twice, fails below), the view is checked.
	// Waiting for the watcher to confirm each revision would cost a
	// second each: it asks etcd every second while quiet.
	from := listed
	check := func() {
		for rev := from + 1; rev <= m.rev; rev++ {
			for _, k := range m.changed[rev] {
				if selects(keys, prefix, k) {
					want[change{rev, k}] = 1
				}
			}
		}
		from = m.rev
		follow(func() bool { return changes >= len(want) })
		if diff := cmp.Diff(m.matching(m.rev, keys, prefix), viewNow()); diff != "" {
			t.Fatalf("view at rev %d (-model +got):\n%s", m.rev, diff)
		}
	}
	check()
	for range 12 {
		step()
		check()
	}
	follow(func() bool { return confirmed >= m.rev }) // and nothing more came
	if diff := cmp.Diff(want, seen, cmp.AllowUnexported(change{})); diff != "" {
		t.Errorf("changes after the listing at rev %d, by how often they came (-model +got):\n%s", listed, diff)
	}
}
