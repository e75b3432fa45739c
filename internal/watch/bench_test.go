package watch

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// The per-change benchmarks run the whole pipeline of `key --prefix
// --changes-only` (etcd key-values decoded as key decodes them, the
// follower with the user's jq, the encoder) over 1,000 keys of node-like
// JSON records, one batch at a time: the source puts a batch only once
// the previous one has been printed, so that nothing merges and every
// change is paid for. They report ns/change and allocs/change.
//
//	go test -run '^$' -bench 'Change' -benchmem ./internal/watch

func BenchmarkChangeTxn50Filter(b *testing.B) {
	benchmarkChanges(b, 50, `.value.state == "NODE_STATE_UP"`, "")
}
func BenchmarkChangeTxn50(b *testing.B) { benchmarkChanges(b, 50, "", "") }
func BenchmarkChangeTxn50FilterEquals(b *testing.B) {
	benchmarkChanges(b, 50, `.value.state == "NODE_STATE_UP"`, ".value.state")
}
func BenchmarkChangePutFilter(b *testing.B) {
	benchmarkChanges(b, 1, `.value.state == "NODE_STATE_UP"`, "")
}

// benchRecord is a node-like record of about 600 bytes, its state and
// heartbeat as given.
func benchRecord(i int, state string, beat int) []byte {
	return fmt.Appendf(nil, `{"id":"metropolis-%08x","state":"%s","status":{"external_address":"10.1.%d.%d","running_curator":{"port":7835},`+
		`"timestamp":"2026-11-24T10:%02d:%02d.%09dZ","version":{"release":{"major":0,"minor":4,"patch":%d}}},`+
		`"roles":{"kubernetes_worker":{},"consensus_member":{"peers":["metropolis-a","metropolis-b"]}},`+
		`"labels":{"pairs":[{"key":"rack","value":"r%d"},{"key":"zone","value":"z%d"},{"key":"hw","value":"epyc-7443p-256g"}]},`+
		`"tpm_usage":"TPM_USAGE_USED","jitter":"%s"}`,
		i, state, i/256, i%256, beat/60%60, beat%60, beat*7919%1e9, beat%9, i%40, i%3, strings.Repeat("x", 160))
}

func benchmarkChanges(b *testing.B, perBatch int, filter, equals string) {
	const keys = 1000
	var o Options
	o.ChangesOnly = true
	var err error
	if filter != "" {
		if o.Filter, err = jq.Compile("--filter", filter, jq.Vars{}); err != nil {
			b.Fatal(err)
		}
	}
	if equals == "" {
		o.EqualsField = "value" // key's default
	} else if o.Equals, err = jq.Compile("--equals", equals, jq.Vars{}); err != nil {
		b.Fatal(err)
	}
	decode := (&etcdkv.Rules{}).Decoder(func(string, ...any) {})
	kv := func(k int, state string, beat int, rev int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: fmt.Appendf(nil, "/nodes/metropolis-%08x", k), Value: benchRecord(k, state, beat),
			CreateRevision: 2, ModRevision: rev, Version: rev - 1}
	}
	// The changes, made beforehand and decoded as they are put (as the
	// watcher decodes them): a third flip a state (printed as new or
	// deleted), a third beat (updated if up), a third put the same record
	// again (not printed). The first of each batch flips. The last batch
	// puts every key back as it was, so that the batches can be played
	// again and again, each printing what it printed the first time.
	states := make([]string, keys)
	beats := make([]int, keys)
	initialState := func(k int) string { return []string{"NODE_STATE_UP", "NODE_STATE_NEW"}[k%2] }
	var first []*mvccpb.KeyValue
	for k := range keys {
		states[k] = initialState(k)
		first = append(first, kv(k, states[k], 0, 2))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const distinct = 200
	batches := make([][]*mvccpb.KeyValue, distinct, distinct+1)
	rev := int64(2)
	for i := range batches {
		rev++
		for j := range perBatch {
			k := rng.IntN(keys)
			switch kind := rng.IntN(3); {
			case j == 0 || kind == 0:
				states[k] = map[string]string{"NODE_STATE_UP": "NODE_STATE_NEW", "NODE_STATE_NEW": "NODE_STATE_UP"}[states[k]]
			case kind == 1:
				beats[k]++
			}
			batches[i] = append(batches[i], kv(k, states[k], beats[k], rev))
		}
	}
	var restore []*mvccpb.KeyValue
	for k := range keys {
		if states[k] != initialState(k) || beats[k] != 0 {
			restore = append(restore, kv(k, initialState(k), 0, 2))
		}
	}
	batches = append(batches, restore)
	batch := func(kvs []*mvccpb.KeyValue, cause flow.Cause) flow.Batch {
		b := flow.Batch{Cause: cause, Synced: true}
		for _, kv := range kvs {
			obj, err := decode(kv)
			if err != nil {
				panic(err)
			}
			obj.(*jsondoc.Doc).Give() // as the watcher gives them
			b.Changes = append(b.Changes, flow.Change{ID: string(kv.Key), Object: obj, Rev: kv.ModRevision})
		}
		return b
	}
	out := &batchCounter{done: make(chan struct{}, 1)}
	src := sourceFunc(func(ctx context.Context, sink flow.Sink) error {
		sink.Put(batch(first, flow.CauseInitial))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		start := time.Now()
		n := 0
		for i := 0; n < b.N; i++ {
			kvs := batches[i%len(batches)]
			sink.Put(batch(kvs, flow.CauseChange))
			n += len(kvs)
			select {
			case <-out.done:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return fmt.Errorf("batch %d not printed", i)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/change")
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/change")
		b.ReportMetric(0, "ns/op")
		return errBenchDone
	})
	if _, err := Run(context.Background(), src, out, o); err != errBenchDone && !strings.Contains(fmt.Sprint(err), errBenchDone.Error()) {
		b.Fatal(err)
	}
}

var errBenchDone = fmt.Errorf("benchmark done")

type sourceFunc func(ctx context.Context, out flow.Sink) error

func (f sourceFunc) Run(ctx context.Context, out flow.Sink) error { return f(ctx, out) }

// batchCounter is the output of a benchmark: it signals each write that
// ends a batch.
type batchCounter struct {
	done  chan struct{}
	bytes atomic.Int64
}

func (c *batchCounter) Write(p []byte) (int, error) {
	c.bytes.Add(int64(len(p)))
	// A batch's lines end with its batch_done line: the last line is
	// read, not the whole write (which cost the benchmark a tenth).
	last := p[:max(len(p)-1, 0)]
	last = last[bytes.LastIndexByte(last, '\n')+1:]
	if bytes.HasPrefix(last, []byte(`{"type":"batch_done"`)) {
		select {
		case c.done <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}
