package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// paged is a Lister: it hands its pages over in order, then returns rev
// (or err). As a Source it would not be used: Run must take List for
// --once. pages, if set, counts the pages handed over.
type paged struct {
	pages [][]flow.Change
	rev   int64
	err   error
	// stop, if set, is called after page n has been handed over.
	stop  func(n int)
	count int
}

func (p *paged) Run(context.Context, flow.Sink) error {
	return errors.New("paged: Run called; --once must use List")
}

func (p *paged) List(ctx context.Context, page func([]flow.Change) error) (int64, error) {
	for i, pg := range p.pages {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		p.count++
		if err := page(pg); err != nil {
			return 0, err
		}
		if p.stop != nil {
			p.stop(i)
		}
	}
	return p.rev, p.err
}

// whole is the same listing as one initial batch, through Run's queue and
// follower.
type whole struct{ b flow.Batch }

func (w whole) Run(ctx context.Context, out flow.Sink) error {
	out.Put(w.b)
	<-ctx.Done()
	return ctx.Err()
}

// TestListModel: --once over a Lister prints, page by page, exactly the
// bytes the follower prints for the whole listing at once: for random
// listings (objects as Docs and as trees, undecodable records), random
// page cuts, with and without a filter, --count and --changes-only.
func TestListModel(t *testing.T) {
	opts := []Options{
		{Once: true},
		{Once: true, Filter: compile(t, "--filter", ".v % 3 != 0")},
		{Once: true, Filter: compile(t, "--filter", ".v > 5"), Count: 4},
		{Once: true, ChangesOnly: true},
	}
	for seed := range int64(300) {
		r := rand.New(rand.NewSource(seed))
		n := r.Intn(40)
		ids := map[string]bool{}
		for range n {
			ids[fmt.Sprintf("k%03d", r.Intn(200))] = true
		}
		var all []flow.Change
		for _, id := range slices.Sorted(func(yield func(string) bool) {
			for id := range ids {
				if !yield(id) {
					return
				}
			}
		}) {
			v := r.Intn(10)
			switch r.Intn(5) {
			case 0:
				all = append(all, flow.Change{ID: id, Undecodable: true})
			case 1:
				all = append(all, flow.Change{ID: id, Object: jsondoc.New(fmt.Appendf(nil, `{"v":%d}`, v))})
			default:
				all = append(all, put(id, v))
			}
		}
		var pages [][]flow.Change
		for rest := all; ; {
			k := r.Intn(len(rest) + 1)
			pages = append(pages, rest[:k])
			rest = rest[k:]
			if len(rest) == 0 {
				break
			}
		}
		rev := r.Int63n(100) + 1
		o := opts[seed%int64(len(opts))]

		var want, got bytes.Buffer
		wres, err := runFor(t, context.Background(), whole{flow.Batch{Changes: all, Cause: flow.CauseInitial, Synced: true, Rev: rev}}, &want, o)
		if err != nil {
			t.Fatal(err)
		}
		src := &paged{pages: pages, rev: rev}
		o.Lister = src
		gres, err := runFor(t, context.Background(), src, &got, o)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got.String() != want.String() || gres != wres {
			t.Fatalf("seed %d, %d pages, options %+v:\npaged %+v\n%s\nwhole %+v\n%s", seed, len(pages), o, gres, got.String(), wres, want.String())
		}
	}
}

func TestListStops(t *testing.T) {
	t.Run("pages out of order fail the run", func(t *testing.T) {
		src := &paged{pages: [][]flow.Change{{put("b", 1)}, {put("a", 2)}}}
		var out bytes.Buffer
		res, err := runFor(t, context.Background(), src, &out, Options{Lister: src, Once: true})
		if res.Stop != Failed || err == nil || !strings.Contains(err.Error(), "out of order") {
			t.Fatalf("Run = %+v, %v; want failed, out of order", res, err)
		}
	})
	t.Run("the listing fails after a page", func(t *testing.T) {
		src := &paged{pages: [][]flow.Change{{put("a", 1)}}, err: errors.New("boom")}
		var out bytes.Buffer
		res, err := runFor(t, context.Background(), src, &out, Options{Lister: src, Once: true})
		if res.Stop != Failed || err == nil || !res.Received || strings.Contains(out.String(), "batch_done") {
			t.Fatalf("Run = %+v, %v, output %q; want failed without batch_done", res, err, out.String())
		}
	})
	t.Run("--count met on the first page reads no more", func(t *testing.T) {
		src := &paged{pages: [][]flow.Change{{put("a", 1), put("b", 2)}, {put("c", 3)}}}
		var out bytes.Buffer
		res, err := runFor(t, context.Background(), src, &out, Options{Lister: src, Once: true, Count: 2})
		if err != nil || res.Stop != GoalMet || res.Events != 2 || src.count != 1 {
			t.Fatalf("Run = %+v, %v after %d pages; want the goal met after 2 events, 1 page", res, err, src.count)
		}
	})
	t.Run("a signal between pages", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := &paged{pages: [][]flow.Change{{put("a", 1)}, {put("b", 2)}}, stop: func(int) { cancel() }}
		var out bytes.Buffer
		res, err := runFor(t, ctx, src, &out, Options{Lister: src, Once: true})
		if err != nil || res.Stop != Interrupted || src.count != 1 {
			t.Fatalf("Run = %+v, %v after %d pages; want interrupted after 1", res, err, src.count)
		}
	})
	t.Run("--until needs the view: no paging", func(t *testing.T) {
		src := &paged{pages: [][]flow.Change{{put("a", 1)}}}
		res, err := runFor(t, context.Background(), src, &bytes.Buffer{}, Options{Lister: src, Once: true, Until: compile(t, "--until", "true"), Timeout: testkit.Quiet})
		if err == nil || res.Stop != Failed || !strings.Contains(err.Error(), "must use List") {
			t.Fatalf("Run = %+v, %v; want Run called (and failing)", res, err)
		}
	})
}
