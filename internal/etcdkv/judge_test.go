package etcdkv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/nodeset"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// recorder is a Sink that keeps every batch, as the source made it.
type recorder struct {
	mu      sync.Mutex
	batches []nodeset.Batch
}

func (r *recorder) Put(b nodeset.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.Changes = slices.Clone(b.Changes) // the source's to reuse (nodeset.Sink)
	r.batches = append(r.batches, b)
}

func (r *recorder) rev() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) == 0 {
		return 0
	}
	return r.batches[len(r.batches)-1].Rev
}

// judging is a recorder that is also the reader's filter (nodeset.Judge),
// as the run's sink is.
type judging struct {
	*recorder
	filter *jq.Program
}

func (j judging) Keeps(obj any) (bool, bool) { return j.filter.TruthyFast(obj) }

// TestWatcherJudges: a watcher whose sink judges objects by the reader's
// filter hands on, for a random history of transactions, batches that a
// follower with that filter turns into the same events, byte for byte,
// with the same warnings, as the batches of a watcher whose sink does not
// judge. The history holds values the filter keeps and turns down, values
// it fails on (a string, an array: the follower warns), values of
// DecodeFrom's size (which the watcher keeps a reference to), puts of the
// same bytes and deletions; the followers free what they let go of (in
// the race detector's builds, overwriting all of it), as a run does.
func TestWatcherJudges(t *testing.T) {
	_, c := etcdtest.StartWith(t, "/j/k0", `{"state":"UP"}`)
	ctx := context.Background()
	resp, err := c.Get(ctx, "/j/k0")
	if err != nil {
		t.Fatal(err)
	}
	start := resp.Header.Revision
	rng := rand.New(rand.NewPCG(23, 5))
	value := func() string {
		state := []string{"UP", "DOWN"}[rng.IntN(2)]
		switch rng.IntN(12) {
		case 0:
			return "not json {" // a string: .value.state fails
		case 1:
			return `["UP"]` // fails too
		case 2:
			return `{"state":null}`
		case 3:
			return fmt.Sprintf(` { "state" : %q } `, state) // compacted
		case 4, 5:
			return fmt.Sprintf(`{"state":%q,"n":%d,"big":"%s"}`, state, rng.IntN(2), strings.Repeat("x", fromMin))
		}
		return fmt.Sprintf(`{"state":%q,"n":%d}`, state, rng.IntN(2))
	}
	var last int64
	for range 300 {
		var ops []clientv3.Op
		for _, k := range rng.Perm(8)[:1+rng.IntN(4)] {
			key := fmt.Sprintf("/j/k%d", k)
			if rng.IntN(6) == 0 {
				ops = append(ops, clientv3.OpDelete(key))
			} else {
				ops = append(ops, clientv3.OpPut(key, value()))
			}
		}
		resp, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}

	filter, err := jq.Compile("--filter", `.value.state == "UP"`, jq.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	// watch returns the batches a watcher puts into sink, from start to
	// the last revision written.
	watch := func(sink interface {
		nodeset.Sink
		rev() int64
	}) {
		t.Helper()
		decode, from := (&Rules{}).Decoders(nil)
		w := &Watcher{Client: c, Key: "/j/", Prefix: true, Decode: decode, DecodeFrom: from, StartRev: start}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx, sink)
		}()
		testkit.Eventually(t, func() error {
			if rev := sink.rev(); rev < last {
				return fmt.Errorf("batches up to rev %d of %d", rev, last)
			}
			return nil
		})
		cancel()
		<-done
	}
	plain, judged := &recorder{}, &recorder{}
	watch(plain)
	watch(judging{judged, filter})

	// Changes turned down: deletions where the plain watcher has a put.
	puts := map[string]bool{} // "rev key"
	for _, b := range plain.batches {
		for _, c := range b.Changes {
			puts[fmt.Sprint(c.Rev, c.ID)] = !c.Deleted
		}
	}
	turnedDown := 0
	for _, b := range judged.batches {
		for _, c := range b.Changes {
			if c.Deleted && puts[fmt.Sprint(c.Rev, c.ID)] {
				turnedDown++
			}
		}
	}
	plainEvents, warnings := follow(t, filter, plain.batches)
	judgedEvents, _ := follow(t, filter, judged.batches)
	if plainEvents != judgedEvents {
		t.Fatalf("events differ; without judging:\n%s\njudged by the watcher:\n%s", plainEvents, judgedEvents)
	}
	t.Logf("%d changes turned down by the watcher, %d warnings", turnedDown, warnings)
	if turnedDown < 100 || warnings < 20 {
		t.Fatalf("%d changes turned down by the watcher, %d warnings: the history does not test what it should", turnedDown, warnings)
	}
}

// follow applies batches with a follower that filters with filter (its
// errors warnings, as a run's), frees what it lets go of, and returns its
// events and warnings as text, and how many warnings there were.
func follow(t *testing.T, filter *jq.Program, batches []nodeset.Batch) (string, int) {
	t.Helper()
	var out strings.Builder
	warnings := 0
	f := nodeset.NewFollower(func(id string, obj any) (bool, error) {
		ok, err := filter.TruthyDoc(context.Background(), obj)
		if err != nil {
			fmt.Fprintf(&out, "warning %s: %v\n", id, err)
			warnings++
		}
		return ok, nil
	}, nil)
	f.Recycle = true
	text := func(o any) string {
		if d, ok := o.(*jsondoc.Doc); ok {
			return string(d.JSON())
		}
		return fmt.Sprint(o)
	}
	for _, b := range batches {
		err := f.Apply(b, func(ev nodeset.Event) error {
			fmt.Fprintf(&out, "%v %s %s %s rev %d\n", ev.Type, ev.ID, text(ev.Object), text(ev.Prev), ev.Rev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out.String(), warnings
}
