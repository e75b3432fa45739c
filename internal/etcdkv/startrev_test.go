package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestStartRevModel: a random history of puts and deletes, one revision
// each, and a random StartRev in it. List, and the first batch of Run,
// are the model's state at StartRev; then Run gives one batch per later
// revision, each exactly that revision's change; then a live change.
func TestStartRevModel(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 8 {
		prefix := fmt.Sprintf("/r%d/", trial)
		type op struct {
			rev   int64
			key   string
			value string // "" for a delete
		}
		var history []op
		state := map[string]string{}
		for range 20 {
			key := prefix + string(rune('a'+rng.IntN(4)))
			if _, ok := state[key]; ok && rng.IntN(3) == 0 {
				resp, err := c.Delete(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				delete(state, key)
				history = append(history, op{resp.Header.Revision, key, ""})
				continue
			}
			v := fmt.Sprint(rng.IntN(1000))
			resp, err := c.Put(ctx, key, v)
			if err != nil {
				t.Fatal(err)
			}
			state[key] = v
			history = append(history, op{resp.Header.Revision, key, v})
		}
		at := rng.IntN(len(history))
		start := history[at].rev
		model := map[string]string{}
		for _, o := range history[:at+1] {
			if o.value == "" {
				delete(model, o.key)
			} else {
				model[o.key] = o.value
			}
		}
		// List (--once) reads the same state.
		listed := map[string]string{}
		lrev, err := (&Watcher{Client: c, Keys: []string{prefix}, Prefix: true, Decode: value, StartRev: start}).List(ctx, func(page []flow.Change) error {
			for _, ch := range page {
				listed[ch.ID] = ch.Object.(string)
			}
			return nil
		})
		if err != nil || lrev != start || fmt.Sprint(listed) != fmt.Sprint(model) {
			t.Fatalf("trial %d, StartRev %d: List gave %v at rev %d (%v), want %v", trial, start, listed, lrev, err, model)
		}
		mb := startWatcher(t, &Watcher{Client: c, Keys: []string{prefix}, Prefix: true, Decode: value, StartRev: start})
		b := next(t, mb)
		got := map[string]string{}
		for _, ch := range b.Changes {
			got[ch.ID] = ch.Object.(string)
		}
		if b.Cause != flow.CauseInitial || b.Rev != start || fmt.Sprint(got) != fmt.Sprint(model) {
			t.Fatalf("trial %d, StartRev %d: first batch %v at rev %d (%v), want %v", trial, start, got, b.Rev, b.Cause, model)
		}
		for _, o := range history[at+1:] {
			b := next(t, mb)
			if len(b.Changes) != 1 || b.Rev != o.rev || b.Changes[0].ID != o.key || b.Changes[0].Deleted != (o.value == "") ||
				!b.Changes[0].Deleted && b.Changes[0].Object.(string) != o.value {
				t.Fatalf("trial %d: batch at rev %d %+v, want rev %d: %+v", trial, b.Rev, b.Changes, o.rev, o)
			}
		}
		resp, err := c.Put(ctx, prefix+"live", "1")
		if err != nil {
			t.Fatal(err)
		}
		if b := next(t, mb); b.Rev != resp.Header.Revision || len(b.Changes) != 1 || b.Changes[0].ID != prefix+"live" {
			t.Fatalf("trial %d: the live change came as %+v", trial, b)
		}
	}
}

// TestStartRevUnreadable: a compacted StartRev, or one ahead of etcd,
// ends Run and List with ErrStartRev (no listing of another revision passes
// for it).
func TestStartRevUnreadable(t *testing.T) {
	_, c := etcdtest.StartWith(t)
	ctx := context.Background()
	var revs []int64
	for i := range 3 {
		resp, err := c.Put(ctx, "/u/a", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	if _, err := c.Compact(ctx, revs[2]); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{revs[0], revs[2] + 1000} {
		err := (&Watcher{Client: c, Keys: []string{"/u/"}, Prefix: true, Decode: value, StartRev: rev}).Run(ctx, discard{})
		if !errors.Is(err, ErrStartRev) {
			t.Errorf("StartRev %d: %v, want ErrStartRev", rev, err)
		}
		_, err = (&Watcher{Client: c, Keys: []string{"/u/"}, Prefix: true, Decode: value, StartRev: rev}).List(ctx, func([]flow.Change) error { return nil })
		if !errors.Is(err, ErrStartRev) {
			t.Errorf("StartRev %d, List: %v, want ErrStartRev", rev, err)
		}
	}
}

// discard is a Sink that keeps nothing.
type discard struct{}

func (discard) Put(flow.Batch) {}
