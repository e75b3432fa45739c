//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// TestKeyLargeValuesFreed: `key` over random transactions of puts and
// deletes, with values below and above the size from which the watcher
// decodes a value from its key's last object (which it then shares with
// the view: whichever lets go of it last frees it, and the next object is
// made from its memory), and above the largest that is freed at all.
// Records go in and out of the filter, are put again unchanged, and are
// not JSON: a string under --value auto, a record that does not decode
// under --value json (the watcher lets go of the key's last object, and
// the view keeps the state before). Every line keeps the stream's rules
// (an update's prev is what was printed last for its id; the replay
// checker), none holds a byte of a freed object, and the stream, replayed,
// holds the model's values at the end. A watcher that let go of a shared
// object twice, or gave it instead of sharing it, frees an object the
// view still holds, and the view prints another record's bytes, or a
// freed one's. In a third run, nothing is read until the end, so that the
// hand-off merges what the view has not taken: objects the watcher has
// let go of wait in the queue, and those of changes a later one replaced
// are dropped there, never reaching the view. In a fourth, the watcher is
// cut off halfway, the history it missed compacted, and it lists again:
// its table of keys, with the objects it shares, is made afresh.
func TestKeyLargeValuesFreed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode            string
		stalled, resync bool
	}{{"auto", false, false}, {"json", false, false}, {"auto", true, false}, {"auto", false, true}} {
		name := c.mode
		switch {
		case c.stalled:
			name += "-stalled"
		case c.resync:
			name += "-resync"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			largeValuesRun(t, c.mode, c.stalled, c.resync)
		})
	}
}

func largeValuesRun(t *testing.T, mode string, stalled, resync bool) {
	ep, c := etcdtest.StartWith(t)
	const filter = `.value | type != "object" or .state != "GONE"`
	unread := 10000 // every line of the run
	if stalled {
		unread = 1
	}
	var proxy *etcdtest.Proxy
	if resync {
		proxy = etcdtest.NewProxy(t, ep)
		ep = proxy.Endpoint
	}
	p := startHolding(t, unread, nil, "key", "--etcd", ep, "--prefix", "/big/", "--value", mode, "--filter", filter)
	view := &replay.Checker{Revs: true}
	batches := 0
	// read reads the lines up to the batch_done after one that holds
	// marker ("": the next batch_done).
	read := func(marker string) {
		for seen := false; ; {
			l := p.next(t)
			if strings.Contains(l, "#") {
				t.Fatalf("a freed object printed: %.300s", l)
			}
			replayLine(t, view, l)
			seen = seen || strings.Contains(l, marker)
			if strings.HasPrefix(l, `{"type":"batch_done"`) {
				batches++
				if seen {
					return
				}
			}
		}
	}
	read("") // the initial batch: nothing

	rng := rand.New(rand.NewPCG(23, 5))
	sizes := []int{300, 900, 1100, 3000, 9000, 40000}
	states := []string{"UP", "DOWN", "GONE"}
	const keys = 16
	// The model: each key's value in etcd, and, under --value json, the
	// last that decoded since the key was made (what the view keeps).
	last, good := map[int]string{}, map[int]string{}
	value := func(k int) string {
		if rng.IntN(12) == 0 {
			return fmt.Sprintf("not JSON, key %d", k)
		}
		if v, ok := last[k]; ok && rng.IntN(6) == 0 {
			return v // put again unchanged
		}
		return fmt.Sprintf(`{"id":"k%02d","state":"%s","beat":%d,"labels":{"a":"%s","b":"%d"}}`,
			k, states[rng.IntN(len(states))], rng.IntN(1000), strings.Repeat("x", sizes[rng.IntN(len(sizes))]), rng.IntN(3))
	}
	ctx := context.Background()
	// Unless it is stalled, the view catches up with the writes every 50
	// transactions (fewer batches than the hand-off keeps apart) while the
	// watcher is connected: the writes come faster than it prints, and on
	// a loaded machine the hand-off would otherwise merge most of them (as
	// it must), leaving few events to test with.
	catchUp := func() {
		etcdtest.Put(t, c, "/big/zz-mark", `{"state":"UP"}`)
		read(`"id":"/big/zz-mark"`)
		etcdtest.Delete(t, c, "/big/zz-mark")
	}
	for i := range 500 {
		cut := resync && i > 200 && i <= 300 // the watcher is cut off before transaction i
		if !stalled && i > 0 && i%50 == 0 && !cut {
			catchUp()
		}
		switch {
		case resync && i == 200:
			proxy.Cut()
		case resync && i == 300:
			etcdtest.Compact(t, c, etcdtest.Put(t, c, "/other", "x"))
			proxy.Restore()
			catchUp()
		}
		var ops []clientv3.Op
		for _, k := range rng.Perm(keys)[:1+rng.IntN(6)] {
			key := fmt.Sprintf("/big/k%02d", k)
			if rng.IntN(10) == 0 {
				ops = append(ops, clientv3.OpDelete(key))
				delete(last, k)
				delete(good, k)
				continue
			}
			v := value(k)
			last[k] = v
			if json.Valid([]byte(v)) {
				good[k] = v
			}
			ops = append(ops, clientv3.OpPut(key, v))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.Put(t, c, "/big/zz-end", `{"state":"UP"}`)
	read(`"id":"/big/zz-end"`)

	// Without --equals, a value put again unchanged prints nothing: the
	// view keeps the revisions it printed. Values are compared.
	shown := last
	if mode == "json" {
		shown = good
	}
	want := 1 // the end marker
	for k := range keys {
		v, ok := shown[k]
		if !ok {
			continue
		}
		var wv any = v // a string, under --value auto
		if json.Valid([]byte(v)) {
			json.Unmarshal([]byte(v), &wv)
		}
		if obj, ok := wv.(map[string]any); ok && obj["state"] == "GONE" {
			continue
		}
		want++
		id := fmt.Sprintf("/big/k%02d", k)
		got, ok := view.Get(id)
		if !ok {
			t.Fatalf("%s: not in the stream, replayed; the model has %.200s", id, v)
		}
		gv, _ := json.Marshal(got.(map[string]any)["value"])
		wb, _ := json.Marshal(wv)
		if string(gv) != string(wb) {
			t.Fatalf("%s: the stream, replayed, has the value %.200s; the model %.200s", id, gv, wb)
		}
	}
	if view.Len() != want {
		t.Fatalf("the stream, replayed, has %d records; the model %d of interest", view.Len(), want)
	}
	t.Logf("%d batches, %d events", batches, view.Events())
	if e := p.stderr.String(); resync && !strings.Contains(e, "compacted") {
		t.Fatalf("no resync: stderr does not mention the compaction:\n%s", e)
	}
	switch {
	case stalled && batches > 200:
		t.Fatalf("%d batches for 500 transactions: the hand-off merged too little to test its freeing", batches)
	case stalled && view.Events() < 50, !stalled && view.Events() < 300:
		t.Fatalf("only %d events: the test tests little", view.Events())
	}
}
