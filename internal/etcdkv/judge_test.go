package etcdkv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/view"
)

// recorder is a Sink that keeps every batch, as the source made it, and
// hands it on to out.
type recorder struct {
	mu      sync.Mutex
	batches []flow.Batch
	out     chan flow.Batch
}

func (r *recorder) Put(b flow.Batch) {
	b.Changes = slices.Clone(b.Changes) // the source's to reuse (flow.Sink)
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	r.out <- b
}

// TestWatcherJudges: a watcher given the reader's filter (Keeps) hands
// on, for a random history of transactions, batches that a
// follower with that filter turns into the same events, byte for byte,
// with the same warnings, as the batches of a watcher not given it, although it leaves out the changes turned down after a change
// turned down. The history holds values the filter keeps and turns down, values
// it fails on (a string, an array: the follower warns), values that are
// not JSON (Undecodable under --value json), values of DecodeFrom's size
// (which the watcher keeps a reference to), puts of the same bytes and
// deletions, and records with more members than a Doc holds the Index
// of in itself. Updates are compared with what they print as changed,
// which the objects' Indexes find. Each follower runs as the watcher
// does, as a run's does (the two share the filter), and frees what it
// lets go of (in the race detector's builds, overwriting all of it).
func TestWatcherJudges(t *testing.T) {
	if !fast.On(fast.JQ) {
		t.Skip("the jq fast path is off (NODEWATCH_FAST): Keeps decides nothing")
	}
	_, c := etcdtest.StartWith(t, "/j/k0", `{"state":"UP"}`)
	ctx := context.Background()
	resp, err := c.Get(ctx, "/j/k0")
	if err != nil {
		t.Fatal(err)
	}
	start := resp.Header.Revision
	rng := rand.New(rand.NewPCG(23, 5))
	value := func() string { return testkit.RandomValue(rng, fromMin, jsondoc.InlineIndex+4) }
	var last int64
	for range 300 {
		resp, err := c.Txn(ctx).Then(etcdtest.RandomOps(rng, "/j/", 8, 6, value)...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}

	filter, err := jq.Compile("--filter", `.value.state == "UP"`, jq.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	// watch runs a watcher into sink, from start, and a follower of what
	// it puts there, until the follower has the last revision written;
	// it returns the follower's events and how many warnings it gave.
	watch := func(sink flow.Sink, batches <-chan flow.Batch, keeps func(any) (bool, bool)) (string, int) {
		t.Helper()
		decode, from := (&Rules{Default: ValueJSON}).Decoders(nil)
		w := &Watcher{Client: c, Keys: []string{"/j/"}, Prefix: true, Decode: decode, DecodeFrom: from, StartRev: start,
			Logf: func(string, ...any) {}, Keeps: keeps}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx, sink)
		}()
		defer func() {
			cancel()
			<-done
		}()
		return follow(t, filter, batches, last)
	}
	plain := &recorder{out: make(chan flow.Batch, 1000)}
	judged := &recorder{out: make(chan flow.Batch, 1000)}
	plainEvents, warnings := watch(plain, plain.out, nil)
	judgedEvents, _ := watch(judged, judged.out, filter.TruthyFast)

	// Changes turned down: deletions where the plain watcher has a put.
	puts := map[string]bool{} // "rev key"
	undecodable := 0
	for _, b := range plain.batches {
		for _, c := range b.Changes {
			puts[fmt.Sprint(c.Rev, c.ID)] = !c.Deleted
			if c.Undecodable {
				undecodable++
			}
		}
	}
	turnedDown, handed := 0, 0
	for _, b := range judged.batches {
		for _, c := range b.Changes {
			handed++
			if c.Deleted && puts[fmt.Sprint(c.Rev, c.ID)] {
				turnedDown++
			}
		}
	}
	// Changes not handed on at all: turned down after a change that was
	// turned down too.
	dropped := len(puts) - handed
	if plainEvents != judgedEvents {
		t.Fatalf("events differ; without judging:\n%s\njudged by the watcher:\n%s", plainEvents, judgedEvents)
	}
	t.Logf("%d changes turned down by the watcher, %d of them not handed on, %d warnings, %d undecodable", turnedDown+dropped, dropped, warnings, undecodable)
	if turnedDown < 100 || dropped < 50 || warnings < 20 || undecodable < 20 {
		t.Fatalf("%d changes turned down by the watcher, %d of them not handed on, %d warnings, %d undecodable: the history does not test what it should",
			turnedDown+dropped, dropped, warnings, undecodable)
	}
}

// follow applies the batches from in, up to one at rev last, with a
// follower that filters with filter (its errors warnings, as a run's)
// and frees what it lets go of, and returns its events and warnings as
// text, and how many warnings there were.
func follow(t *testing.T, filter *jq.Program, in <-chan flow.Batch, last int64) (string, int) {
	t.Helper()
	var out strings.Builder
	warnings := 0
	f := view.NewFollower(func(id string, obj any) (bool, error) {
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
	var differ jsondoc.Differ
	timeout := time.After(testkit.Timeout)
	for {
		var b flow.Batch
		select {
		case b = <-in:
		case <-timeout:
			t.Fatalf("no batch at rev %d within %v", last, testkit.Timeout)
		}
		err := f.Apply(b, func(ev flow.Event) error {
			fmt.Fprintf(&out, "%v %s %s %s rev %d", ev.Type, ev.ID, text(ev.Object), text(ev.Prev), ev.Rev)
			if a, ok := ev.Prev.(*jsondoc.Doc); ok && ev.Type == flow.Updated {
				// What an update prints as changed, which the objects'
				// Indexes find.
				fmt.Fprintf(&out, " changed %v", differ.Diff(a, ev.Object.(*jsondoc.Doc)))
			}
			out.WriteByte('\n')
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if b.Rev >= last {
			break
		}
	}
	return out.String(), warnings
}
