package etcdkv

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/etcdwire"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// startWatcher runs w (a Watcher or a Source) until the test ends and
// returns its mailbox.
func startWatcher(t *testing.T, w interface {
	Run(context.Context, flow.Sink) error
}) *handoff.Queue {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mb := handoff.New(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mb.Close(w.Run(ctx, mb))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return mb
}

func next(t *testing.T, mb *handoff.Queue) flow.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	b, err := mb.Next(ctx)
	for err == nil && !b.Full() && len(b.Changes) == 0 {
		b, err = mb.Next(ctx) // a confirmation alone (see TestWatcherConfirms)
	}
	if err != nil {
		t.Fatalf("no batch: %v", err)
	}
	sort.Slice(b.Changes, func(i, j int) bool { return b.Changes[i].ID < b.Changes[j].ID })
	return b
}

func value(kv *mvccpb.KeyValue) (any, error) { return string(kv.Value), nil }

// putNumbered puts n keys, prefix followed by 00000, 00001, …, each with
// the value "v", 100 to a transaction.
func putNumbered(t *testing.T, c *clientv3.Client, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%05d", prefix, j), "v"))
		}
		if _, err := c.Txn(context.Background()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListPaged: 2,500 keys at page size 100 arrive as 25 responses but
// one initial batch, all at the revision of the first page.
func TestListPaged(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	const n = 2500
	putNumbered(t, c, "/p/", n)
	etcdtest.Put(t, c, "/p0", "outside the prefix")

	var mu sync.Mutex
	var pages []int
	w := &Watcher{Client: c, Keys: []string{"/p/"}, Prefix: true, PageSize: 100, Decode: value}
	w.onPage = func(k int) {
		mu.Lock()
		defer mu.Unlock()
		pages = append(pages, k)
	}
	b := next(t, startWatcher(t, w))
	if b.Cause != flow.CauseInitial || !b.Synced || len(b.Changes) != n {
		t.Fatalf("initial batch: cause %v synced %v, %d changes; want initial, synced, %d", b.Cause, b.Synced, len(b.Changes), n)
	}
	for i, c := range b.Changes {
		if want := fmt.Sprintf("/p/%05d", i); c.ID != want {
			t.Fatalf("change %d is %q, want %q", i, c.ID, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pages) != n/100 || pages[0] != 100 {
		t.Errorf("list responses = %v, want %d pages of 100", pages, n/100)
	}
}

// TestResumeAfterDisconnect: a watcher cut off and let back catches up
// with every change made meanwhile, as change batches, with no relisting.
// (Here the etcd client resumes the watch by itself; TestResumeAfterNoLeader
// drives the watcher's own resume loop.)
func TestResumeAfterDisconnect(t *testing.T) {
	ep, c := etcdtest.StartWith(t)
	proxy := etcdtest.NewProxy(t, ep)
	pc := etcdtest.Client(t, proxy.Endpoint)
	var logs testkit.Buffer
	w := &Watcher{Client: pc, Keys: []string{"/r/"}, Prefix: true, Decode: value, MaxBackoff: 200 * time.Millisecond, Logf: logs.Logf}
	mb := startWatcher(t, w)
	if b := next(t, mb); b.Cause != flow.CauseInitial {
		t.Fatalf("first batch cause %v", b.Cause)
	}
	proxy.Cut()
	r1 := etcdtest.Put(t, c, "/r/a", "1")
	r2 := etcdtest.Put(t, c, "/r/a", "2")
	r3 := etcdtest.Delete(t, c, "/r/a")
	proxy.Restore()

	// The three revisions may arrive as one merged batch or several; what
	// must hold: no resync, and the final state is the deletion at r3.
	var got []flow.Change
	for len(got) == 0 || got[len(got)-1].Rev != r3 {
		b := next(t, mb)
		if b.Cause != flow.CauseChange {
			t.Fatalf("batch cause %v after a plain disconnect, want change", b.Cause)
		}
		got = append(got, b.Changes...)
	}
	last := got[len(got)-1]
	if diff := cmp.Diff(flow.Change{ID: "/r/a", Deleted: true, Rev: r3}, last); diff != "" {
		t.Errorf("last change (-want +got):\n%s", diff)
	}
	for _, c := range got {
		if c.Rev != r1 && c.Rev != r2 && c.Rev != r3 {
			t.Errorf("unexpected change %+v", c)
		}
	}
}

// TestSingleKeyIgnoresSiblings: without Prefix only the key itself is
// listed and watched.
func TestSingleKeyIgnoresSiblings(t *testing.T) {
	_, c := etcdtest.StartWith(t, "/s", "1", "/s/child", "1")
	mb := startWatcher(t, &Watcher{Client: c, Keys: []string{"/s"}, Decode: value})
	b := next(t, mb)
	if len(b.Changes) != 1 || b.Changes[0].ID != "/s" {
		t.Fatalf("initial batch %+v, want only /s", b.Changes)
	}
	etcdtest.Put(t, c, "/s/child", "2")
	rev := etcdtest.Put(t, c, "/s", "2")
	b = next(t, mb)
	if len(b.Changes) != 1 || b.Changes[0].Rev != rev || b.Changes[0].Object != "2" {
		t.Fatalf("change batch %+v, want /s=2 at rev %d", b.Changes, rev)
	}
}

// TestResumeAfterNoLeader: the member a watcher talks to loses its quorum,
// so etcd cancels the watch (the watcher requires a leader) and the
// watcher's own loop must watch again from the last revision + 1 once the
// cluster is back: the changes made after it arrive, with no resync.
func TestResumeAfterNoLeader(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 3)
	all := etcdtest.Client(t, strings.Join(cluster.Endpoints, ","))
	only0 := etcdtest.Client(t, cluster.Endpoints[0])
	var logs testkit.Buffer
	w := &Watcher{Client: only0, Keys: []string{"/q/"}, Prefix: true, Decode: value, MaxBackoff: 200 * time.Millisecond, Logf: logs.Logf, Debugf: logs.Logf}
	mb := startWatcher(t, w)
	next(t, mb) // the initial listing
	rev := etcdtest.Put(t, all, "/q/a", "1")
	if b := next(t, mb); b.Rev != rev {
		t.Fatalf("batch at rev %d, want %d", b.Rev, rev)
	}

	cluster.Kill(1)
	cluster.Kill(2)
	want := fmt.Sprintf("resuming at rev %d", rev+1)
	// Elections take a few seconds: three times the usual timeout.
	if err := testkit.Poll(t.Context(), 3*testkit.Timeout, func() (bool, error) {
		return strings.Contains(logs.String(), want), nil
	}); err != nil {
		t.Fatalf("the watcher did not resume at rev %d (%v); log:\n%s", rev+1, err, logs.String())
	}
	cluster.Restart(1)
	cluster.Restart(2)
	rev2 := etcdtest.PutRetrying(t, all, "/q/a", "2")
	for {
		b := next(t, mb)
		if b.Cause != flow.CauseChange {
			t.Fatalf("batch cause %v after the cluster came back, want change", b.Cause)
		}
		if b.Rev == rev2 {
			return
		}
	}
}

// listedSink records what a source reports while it lists (its Listed
// is the watcher's), and the size of each full batch it puts, in order.
type listedSink struct {
	mu  sync.Mutex
	log []string
	put chan struct{}
}

func (s *listedSink) Listed(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("listed %d", n))
}

func (s *listedSink) Put(b flow.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("put %v of %d", b.Cause, len(b.Changes)))
	if b.Full() {
		s.put <- struct{}{}
	}
}

// TestListReportsProgress: while it lists, the watcher tells Listed how
// many objects it has read, page by page, before it puts the full batch.
func TestListReportsProgress(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	for i := range 5 {
		etcdtest.Put(t, c, fmt.Sprintf("/r/%d", i), "v")
	}
	s := &listedSink{put: make(chan struct{}, 1)}
	w := &Watcher{Client: c, Keys: []string{"/r/"}, Prefix: true, PageSize: 2, Decode: value, Listed: s.Listed}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, s)
	}()
	select {
	case <-s.put:
	case <-time.After(testkit.Timeout):
		t.Fatal("no full batch")
	}
	cancel()
	<-done
	want := []string{"listed 2", "listed 4", "listed 5", "put initial of 5"}
	if diff := cmp.Diff(want, s.log); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}

// TestWatcherTwoPrefixes: two prefixes are one state: listed at one revision (in
// key order, page by page), then watched from the next, a change in each
// arriving; a key under neither never does.
func TestWatcherTwoPrefixes(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	for _, k := range []string{"/e/h3/a", "/e/h3/b", "/e/*/c", "/e/h2/d", "/e/h30/e"} {
		etcdtest.Put(t, c, k, "v")
	}
	w := &Watcher{Client: c, Keys: []string{"/e/h3/", "/e/*/"}, Prefix: true, PageSize: 1, Decode: value}
	var listed []string
	if _, err := w.List(context.Background(), func(page []flow.Change) error {
		for _, ch := range page {
			listed = append(listed, ch.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/e/*/c", "/e/h3/a", "/e/h3/b"}; !cmp.Equal(want, listed) {
		t.Fatalf("List = %q, want %q", listed, want)
	}

	q := startWatcher(t, w)
	b := next(t, q)
	if ids := changeIDs(b); !cmp.Equal([]string{"/e/*/c", "/e/h3/a", "/e/h3/b"}, ids) {
		t.Fatalf("initial batch %q", ids)
	}
	etcdtest.Put(t, c, "/e/h2/x", "not h3's")
	etcdtest.Put(t, c, "/e/*/y", "to every host")
	if ids := changeIDs(next(t, q)); !cmp.Equal([]string{"/e/*/y"}, ids) {
		t.Fatalf("after a put under /e/*/: %q", ids)
	}
	etcdtest.Put(t, c, "/e/h30/z", "not h3's either")
	etcdtest.Put(t, c, "/e/h3/z", "to h3")
	if ids := changeIDs(next(t, q)); !cmp.Equal([]string{"/e/h3/z"}, ids) {
		t.Fatalf("after a put under /e/h3/: %q", ids)
	}
}

func changeIDs(b flow.Batch) []string {
	var ids []string
	for _, c := range b.Changes {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestWatcherTwoPrefixesResumeEachRange: after a broken connection, each range
// resumes from the last revision it delivered: a change delivered before
// the break in one range is not delivered again because the other range
// was quiet.
func TestWatcherTwoPrefixesResumeEachRange(t *testing.T) {
	ep, c := etcdtest.StartWith(t)
	proxy := etcdtest.NewProxy(t, ep)
	pc := etcdtest.Client(t, proxy.Endpoint)
	w := &Watcher{Client: pc, Keys: []string{"/f/a/", "/f/b/"}, Prefix: true, Decode: value, MaxBackoff: 200 * time.Millisecond}
	q := startWatcher(t, w)
	next(t, q) // the initial, empty state
	etcdtest.Put(t, c, "/f/a/1", "delivered before the break")
	if ids := changeIDs(next(t, q)); !cmp.Equal([]string{"/f/a/1"}, ids) {
		t.Fatalf("before the break: %q", ids)
	}
	proxy.Cut()
	rb := etcdtest.Put(t, c, "/f/b/1", "made during the break")
	proxy.Restore()
	b := next(t, q)
	if ids := changeIDs(b); !cmp.Equal([]string{"/f/b/1"}, ids) || b.Rev != rb {
		t.Fatalf("after the break: %q at rev %d; want only /f/b/1 at rev %d", ids, b.Rev, rb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if b, err := q.Next(ctx); err == nil {
		t.Fatalf("then %q at rev %d: delivered again", changeIDs(b), b.Rev)
	}
}

// rangeCounter counts the Range requests that a client sends to etcd.
type rangeCounter struct{ gets atomic.Int32 }

func (r *rangeCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == etcdwire.RangeMethod {
		r.gets.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestListReadsOneAhead: while a page is handled, the next one is read
// (the listing overlaps etcd's time), and only that one: a reader that
// stalls holds two pages, not the listing.
func TestListReadsOneAhead(t *testing.T) {
	url, c := etcdtest.StartWith(t)
	ctx := context.Background()
	const n, size = 1000, 100
	putNumbered(t, c, "/a/", n)
	kv := &rangeCounter{}
	counted, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: testkit.Timeout,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(kv.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	defer counted.Close()
	w := &Watcher{Client: counted, Keys: []string{"/a/"}, Prefix: true, PageSize: size, Decode: value}
	release := make(chan struct{})
	var ids []string
	done := make(chan error, 1)
	go func() {
		_, err := w.List(ctx, func(page []flow.Change) error {
			if len(ids) == 0 {
				<-release
			}
			for _, c := range page {
				ids = append(ids, c.ID)
			}
			return nil
		})
		done <- err
	}()
	testkit.Eventually(t, func() error {
		if kv.gets.Load() < 2 {
			return fmt.Errorf("%d pages read; want the second read while the first is handled", kv.gets.Load())
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // reads that were to follow would come within it
	if got := kv.gets.Load(); got != 2 {
		t.Fatalf("%d pages read while the first is handled, want 2", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(ids) != n || !slices.IsSorted(ids) || kv.gets.Load() != n/size {
		t.Errorf("listed %d ids (sorted: %v) in %d reads; want %d in %d", len(ids), slices.IsSorted(ids), kv.gets.Load(), n, n/size)
	}
}

// TestPageSize: pages are sized by the bytes of the keys listed so far.
func TestPageSize(t *testing.T) {
	w := &Watcher{}
	for _, c := range []struct{ keys, size, want int64 }{
		{0, 0, FirstPageSize},
		{1000, 200 * 1000, MaxPageSize},       // small records: as many as allowed
		{1000, 4096 * 1000, PageBytes / 4096}, // 4 KiB records: PageBytes of them
		{1000, 1 << 30, FirstPageSize},        // huge records: never fewer than the first page
	} {
		if got := w.pageSize(c.keys, c.size); got != c.want {
			t.Errorf("pageSize(%d keys, %d bytes) = %d, want %d", c.keys, c.size, got, c.want)
		}
	}
	if got := (&Watcher{PageSize: 7}).pageSize(1000, 1000); got != 7 {
		t.Errorf("PageSize 7: pageSize = %d", got)
	}
}

// TestWatcherDecodesFromLast: a watch event of a large value is decoded
// from the key's object of its last event (DecodeFrom, with that object),
// small ones and listings with Decode; a deletion forgets the key. The
// objects are those Decode makes.
func TestWatcherDecodesFromLast(t *testing.T) {
	_, c := etcdtest.StartWith(t, "/d/a", `{"n":0}`)
	big := func(n int) string {
		return fmt.Sprintf(`{"n":%d,"labels":"%s"}`, n, strings.Repeat("x", fromMin))
	}
	decode, from := (&Rules{}).Decoders(nil)
	var refs []any
	w := &Watcher{Client: c, Keys: []string{"/d/"}, Prefix: true, Decode: decode,
		DecodeFrom: func(kv *mvccpb.KeyValue, ref any) (any, error) {
			refs = append(refs, ref) // the watcher's goroutine only
			return from(kv, ref)
		}}
	mb := startWatcher(t, w)
	next(t, mb) // the listing
	var objs []any
	for i, v := range []string{big(1), big(2), `{"n":3}`, big(4)} {
		etcdtest.Put(t, c, "/d/a", v)
		b := next(t, mb)
		want, err := decode(&mvccpb.KeyValue{Key: []byte("/d/a"), Value: []byte(v), CreateRevision: 2,
			ModRevision: b.Changes[0].Rev, Version: int64(i + 2)})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Changes[0].Object.(*jsondoc.Doc); !bytes.Equal(got.JSON(), want.(*jsondoc.Doc).JSON()) {
			t.Fatalf("put %d: %s, Decode makes %s", i, got.JSON(), want.(*jsondoc.Doc).JSON())
		}
		objs = append(objs, b.Changes[0].Object)
	}
	etcdtest.Delete(t, c, "/d/a")
	next(t, mb)
	etcdtest.Put(t, c, "/d/a", big(5))
	next(t, mb)
	// The first big value has no earlier event; the second is decoded
	// from the first; the small one with Decode; the fourth from the
	// second (an entry stays when a value shrinks); after the deletion,
	// nothing.
	if len(refs) != 2 || refs[0] != objs[0] || refs[1] != objs[1] {
		t.Fatalf("DecodeFrom got %d references (%v), want the objects of puts 1 and 2", len(refs), refs)
	}
}

// TestWatcherKeyStates: over random transactions of puts and deletes on
// a few keys, each change carries ID's id for its key, the same string
// (by pointer) from one change of a key to the next while the key lives,
// and the watcher keeps a state for the live keys only: its table is the
// model's set of keys after every batch.
func TestWatcherKeyStates(t *testing.T) {
	_, c := etcdtest.StartWith(t, "/s/k0", "0", "/s/k1", "1")
	ctx := context.Background()
	w := &Watcher{Client: c, Keys: []string{"/s/"}, Prefix: true, Decode: value,
		ID: func(key string) string { return "id:" + key }}
	mb := startWatcher(t, w)
	live := map[string]string{} // key: the id string its changes carry
	check := func(b flow.Batch) {
		t.Helper()
		for _, ch := range b.Changes {
			key := strings.TrimPrefix(ch.ID, "id:")
			if ch.ID != "id:"+key {
				t.Fatalf("change of %q: id %q", key, ch.ID)
			}
			was, ok := live[key]
			switch {
			case ok && unsafe.StringData(was) != unsafe.StringData(ch.ID):
				t.Fatalf("change of %q at rev %d: a new id string, not the one its earlier changes carried", key, ch.Rev)
			case ch.Deleted:
				delete(live, key)
			default:
				live[key] = ch.ID
			}
		}
		// The batch came through the queue after the watcher made it;
		// the watcher touches keys again only for the next event.
		if got := slices.Sorted(maps.Keys(w.keys)); !slices.Equal(got, slices.Sorted(maps.Keys(live))) {
			t.Fatalf("after rev %d the watcher keeps %q, the live keys are %q", b.Rev, got, slices.Sorted(maps.Keys(live)))
		}
	}
	check(next(t, mb))
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 150 {
		var ops []clientv3.Op
		for _, k := range rng.Perm(6)[:1+rng.IntN(3)] {
			key := fmt.Sprintf("/s/k%d", k)
			if rng.IntN(3) == 0 {
				ops = append(ops, clientv3.OpDelete(key))
			} else {
				ops = append(ops, clientv3.OpPut(key, fmt.Sprint(i)))
			}
		}
		resp, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		if changed := slices.ContainsFunc(resp.Responses, func(r *etcdserverpb.ResponseOp) bool {
			d := r.GetResponseDeleteRange()
			return d == nil || d.Deleted > 0
		}); changed {
			check(next(t, mb))
		}
	}
}

// TestWatcherKeyStatesResync: a key deleted while the watcher was cut
// off, its history compacted meanwhile, leaves the watcher's table with
// the relisting: the table is the listed keys, not what it held before.
func TestWatcherKeyStatesResync(t *testing.T) {
	ep, c := etcdtest.StartWith(t, "/k/a", "1", "/k/b", "1")
	proxy := etcdtest.NewProxy(t, ep)
	pc := etcdtest.Client(t, proxy.Endpoint)
	w := &Watcher{Client: pc, Keys: []string{"/k/"}, Prefix: true, Decode: value, MaxBackoff: 200 * time.Millisecond}
	mb := startWatcher(t, w)
	next(t, mb)
	proxy.Cut()
	etcdtest.Delete(t, c, "/k/b")
	etcdtest.Compact(t, c, etcdtest.Put(t, c, "/k/c", "1"))
	proxy.Restore()
	b := next(t, mb)
	for !b.Full() {
		b = next(t, mb)
	}
	if b.Cause != flow.CauseResync {
		t.Fatalf("full batch of cause %v, want a resync", b.Cause)
	}
	if got := slices.Sorted(maps.Keys(w.keys)); !slices.Equal(got, []string{"/k/a", "/k/c"}) {
		t.Fatalf("after the resync the watcher keeps %q, want the listed keys", got)
	}
}
