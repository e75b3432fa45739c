package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// TestRecycleModel: a run whose follower frees the objects that leave its
// view (Follower.Recycle, over objects the source gave: jsondoc.Doc.Give)
// prints what a run that frees nothing prints, byte for byte, over random
// changes to random keys: puts that change a record's state (in and out
// of the filter), its heartbeat or nothing, deletes, puts of new keys,
// records that do not decode, and relistings (full batches, whose
// missing keys are deleted). A freed object is overwritten at once and made again into the
// next change's, so an object freed while the view or an event still
// holds it shows in the output.
func TestRecycleModel(t *testing.T) {
	for _, c := range []struct{ name, filter, equals string }{
		{"filter", `.value.state == "UP"`, ""},
		{"no filter", "", ""},
		{"equals", `.value.state != "GONE"`, ".value.state"},
		{"slow path", `.value.state | test("^U")`, `.value | del(.beat)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(3) {
				plain := recycleRun(t, seed, c.filter, c.equals, false, false)
				freed := recycleRun(t, seed, c.filter, c.equals, true, false)
				if !bytes.Equal(plain, freed) {
					t.Fatalf("seed %d: with objects freed the run printed\n%s\nwithout\n%s", seed, firstDiff(freed, plain), firstDiff(plain, freed))
				}
				if bytes.Count(plain, []byte("\n")) < 500 {
					t.Fatalf("seed %d: only %d lines: the model tests little", seed, bytes.Count(plain, []byte("\n")))
				}
			}
		})
	}
}

// TestRecycleMerged: with objects freed, a reader slower than the
// source, whose batches the hand-off merges, prints JSON lines only, none
// of them with a byte that Free writes (which the records never hold):
// no freed object is printed, whatever the hand-off dropped or moved.
func TestRecycleMerged(t *testing.T) {
	for _, c := range []struct{ name, filter, equals string }{
		{"filter", `.value.state == "UP"`, ""},
		{"equals", `.value.state != "GONE"`, ".value.state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := recycleRun(t, 7, c.filter, c.equals, true, true)
			lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
			for _, l := range lines {
				if !json.Valid(l) || bytes.IndexByte(l, '#') >= 0 {
					t.Fatalf("a line that is no record's: %.300s", l)
				}
			}
			n := bytes.Count(out, []byte(`"batch_done"`))
			t.Logf("%d batches printed of 401", n)
			if n > 300 {
				t.Fatalf("%d batches printed of 401: the hand-off merged too few to test it", n)
			}
		})
	}
}

// firstDiff returns the line of a where a and b first differ.
func firstDiff(a, b []byte) []byte {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	start := bytes.LastIndexByte(a[:i], '\n') + 1
	end := bytes.IndexByte(a[i:], '\n')
	if end < 0 {
		return a[start:]
	}
	return a[start : i+end]
}

// recycleRun runs `key --prefix` over 400 batches of random changes to
// 60 keys, decoded as key decodes them, each batch put once the one before
// is printed (every batch changes a tick key, so that each prints), and
// returns what it printed. give: the objects are given, and freed. burst:
// the batches are put at once, to a reader that writes slowly, and the
// run ends once an end marker put last is printed.
func recycleRun(t *testing.T, seed uint64, filter, equals string, give, burst bool) []byte {
	t.Helper()
	var o Options
	var err error
	if filter != "" {
		if o.Filter, err = jq.Compile("--filter", filter, jq.Vars{}); err != nil {
			t.Fatal(err)
		}
	}
	if equals == "" {
		o.EqualsField = "value"
	} else if o.Equals, err = jq.Compile("--equals", equals, jq.Vars{}); err != nil {
		t.Fatal(err)
	}
	decode := (&etcdkv.Rules{}).Decoder(func(string, ...any) {})
	rng := rand.New(rand.NewPCG(seed, 99))
	const keys = 60
	states := []string{"UP", "DOWN", "NEW", "GONE"}
	type rec struct {
		state string
		beat  int
		live  bool
	}
	recs := make([]rec, keys)
	rev := int64(1)
	kv := func(k int, r rec) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: fmt.Appendf(nil, "/n/k%02d", k),
			Value:          fmt.Appendf(nil, `{"id":"k%02d","state":"%s","beat":%d,"pad":"%0*d"}`, k, r.state, r.beat, k%7*30, 0),
			CreateRevision: 2, ModRevision: rev, Version: int64(r.beat + 1)}
	}
	change := func(kv *mvccpb.KeyValue, deleted bool) flow.Change {
		c := flow.Change{ID: string(kv.Key), Rev: kv.ModRevision, Deleted: deleted}
		if deleted {
			return c
		}
		obj, err := decode(kv)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := obj.(*jsondoc.Doc); ok && give {
			d.Give()
		}
		c.Object = obj
		return c
	}
	next := func(tick int) flow.Batch {
		rev++
		b := flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: rev}
		if tick%50 == 49 {
			// A relisting: every live record, as new objects; a few
			// changed since, and the keys deleted since missing.
			b.Cause = flow.CauseResync
			b.Changes = append(b.Changes, change(&mvccpb.KeyValue{Key: []byte("/n/tick"),
				Value: fmt.Appendf(nil, `{"state":"%s","beat":%d,"n":%d}`, []string{"UP", "UPPER"}[tick%2], tick, tick), ModRevision: rev}, false))
			for k := range recs {
				r := &recs[k]
				if rng.IntN(5) == 0 {
					r.live = !r.live
					r.state = states[rng.IntN(len(states))]
				}
				if r.live {
					b.Changes = append(b.Changes, change(kv(k, *r), false))
				}
			}
			return b
		}
		// The tick: changed every batch, as every --equals sees it.
		b.Changes = append(b.Changes, change(&mvccpb.KeyValue{Key: []byte("/n/tick"),
			Value: fmt.Appendf(nil, `{"state":"%s","beat":%d,"n":%d}`, []string{"UP", "UPPER"}[tick%2], tick, tick), ModRevision: rev}, false))
		seen := map[int]bool{}
		for range 1 + rng.IntN(8) {
			k := rng.IntN(keys)
			if seen[k] {
				continue
			}
			seen[k] = true
			r := &recs[k]
			switch p := rng.IntN(20); {
			case p == 19:
				// A record that does not decode: the view keeps the
				// state before it.
				b.Changes = append(b.Changes, flow.Change{ID: string(kv(k, *r).Key), Rev: rev, Undecodable: true})
				continue
			case p < 2 && r.live:
				r.live = false
				b.Changes = append(b.Changes, change(kv(k, *r), true))
				continue
			case p < 8:
				r.state = states[rng.IntN(len(states))]
			case p < 16:
				r.beat++
			} // else the same again
			r.live = true
			b.Changes = append(b.Changes, change(kv(k, *r), false))
		}
		return b
	}
	out := &markWriter{mark: []byte(`"batch_done"`), seen: make(chan struct{}, 1)}
	errDone := errors.New("done")
	if burst {
		out.mark, out.delay = []byte(`"end":true`), 200*time.Microsecond
		out.gate, out.held = make(chan struct{}), make(chan struct{})
	}
	src := sourceFunc(func(ctx context.Context, sink flow.Sink) error {
		sink.Put(flow.Batch{Cause: flow.CauseInitial, Synced: true, Rev: 1})
		if burst {
			// The first half is put while the reader is held in its
			// first write, so the hand-off merges it however fast the
			// reader is; the second half meets a reader slowed by
			// delay, merged as it comes.
			select {
			case <-out.held:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return errors.New("the initial batch was not printed")
			}
			for tick := range 400 {
				if tick == 200 {
					close(out.gate)
				}
				sink.Put(next(tick))
			}
			rev++
			sink.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: rev, Changes: []flow.Change{
				change(&mvccpb.KeyValue{Key: []byte("/n/zz-end"), Value: []byte(`{"state":"UP","end":true}`), ModRevision: rev}, false)}})
			select {
			case <-out.seen:
				return errDone
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return errors.New("the end marker was not printed")
			}
		}
		for tick := -1; tick < 400; tick++ {
			if tick >= 0 {
				sink.Put(next(tick))
			} // else the initial batch's batch_done
			select {
			case <-out.seen:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return fmt.Errorf("batch %d not printed", tick)
			}
		}
		return errDone
	})
	if _, err := Run(context.Background(), src, out, o); !errors.Is(err, errDone) {
		t.Fatalf("run: %v", err)
	}
	return out.bytes()
}

// markWriter keeps what is written, and signals each write that holds
// mark. With a gate, its first write closes held and waits for the gate
// to be closed.
type markWriter struct {
	mark       []byte
	seen       chan struct{}
	delay      time.Duration // of each write
	gate, held chan struct{}
	holding    sync.Once
	mu         sync.Mutex
	buf        bytes.Buffer
}

func (w *markWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		w.holding.Do(func() { close(w.held) })
		<-w.gate
	}
	time.Sleep(w.delay)
	w.mu.Lock()
	w.buf.Write(p)
	w.mu.Unlock()
	if bytes.Contains(p, w.mark) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (w *markWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}
