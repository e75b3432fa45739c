package devfleet

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The dev fleet's nodes send heartbeats, as Metropolis nodes do to their
// Curator, and serve answers GetNodes from them: a heartbeat is written
// into the node's record, as its "heartbeat" (when) and "health" members
// (see curator.DecodeHealth). Now and then one node misses its heartbeats
// for a while; once its last one is older than HeartbeatTimeout, its
// health is HEALTH_HEARTBEAT_TIMEOUT, until it sends one again.
const (
	// HeartbeatPeriod is how often each node sends a heartbeat.
	HeartbeatPeriod = 2 * time.Second
	// HeartbeatTimeout is how old a node's last heartbeat may be before
	// its health is HEALTH_HEARTBEAT_TIMEOUT.
	HeartbeatTimeout = 3 * HeartbeatPeriod
	// outage is how long a node misses heartbeats, and outageEvery how
	// long the fleet goes, on average, between two outages.
	outage      = 15 * time.Second
	outageEvery = 45 * time.Second
)

// heartbeats is the heartbeat state of the fleet's nodes, by id.
type heartbeats struct {
	prefix string
	rng    *rand.Rand // only the loop uses it

	mu          sync.Mutex // guards the fields below
	last        map[string]time.Time
	down        string    // the node in an outage, "" for none
	outageUntil time.Time // when it ends
}

func newHeartbeats(prefix string, seed int64) *heartbeats {
	return &heartbeats{prefix: prefix, rng: rand.New(rand.NewPCG(uint64(seed), 0x6862)), last: map[string]time.Time{}}
}

// health returns what the record of id says of its health at now: when
// it last sent a heartbeat, and whether that was recently enough. A node
// not seen before has just sent its first.
func (h *heartbeats) health(id string, now time.Time) (last time.Time, health string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.last[id]
	if !ok {
		last = now
		h.last[id] = last
	}
	if now.Sub(last) > HeartbeatTimeout {
		return last, "HEALTH_HEARTBEAT_TIMEOUT"
	}
	return last, "HEALTH_HEALTHY"
}

// beat is one heartbeat round at now over the nodes ids: each sends one,
// but a node in an outage; an outage may start or end.
func (h *heartbeats) beat(ids []string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down != "" && !now.Before(h.outageUntil) {
		h.down = ""
	}
	if h.down == "" && len(ids) > 0 && h.rng.Float64() < float64(HeartbeatPeriod)/float64(outageEvery) {
		h.down, h.outageUntil = ids[h.rng.IntN(len(ids))], now.Add(outage)
	}
	present := make(map[string]bool, len(ids))
	for _, id := range ids {
		present[id] = true
		if id != h.down {
			h.last[id] = now
		}
	}
	for id := range h.last {
		if !present[id] {
			delete(h.last, id) // its record is gone: the fleet churns through ids
		}
	}
}

// annotate returns the record value with the heartbeat members of the
// node whose key it is, as of now; a value that is not a JSON object (a
// binary record) as it is.
func (h *heartbeats) annotate(key string, value []byte, now time.Time) []byte {
	id, ok := strings.CutPrefix(key, h.prefix)
	if !ok {
		return value
	}
	var rec map[string]json.RawMessage
	if json.Unmarshal(value, &rec) != nil {
		return value
	}
	last, health := h.health(id, now)
	rec["heartbeat"], _ = json.Marshal(last.UTC().Format(time.RFC3339Nano))
	rec["health"], _ = json.Marshal(health)
	out, err := json.Marshal(rec)
	if err != nil {
		return value
	}
	return out
}

// run sends the fleet's heartbeats every HeartbeatPeriod until ctx ends:
// each record is rewritten with its node's heartbeat, unless it changed
// since it was read (the simulator's write, annotated too, wins).
func (h *heartbeats) run(ctx context.Context, c *clientv3.Client) {
	t := time.NewTicker(HeartbeatPeriod)
	defer t.Stop()
	for {
		h.round(ctx, c)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round is one heartbeat round, written into etcd.
func (h *heartbeats) round(ctx context.Context, c *clientv3.Client) {
	resp, err := c.Get(ctx, h.prefix, clientv3.WithPrefix())
	if err != nil {
		return // etcd is stopping, or slow: the next round
	}
	now := time.Now()
	ids := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ids = append(ids, strings.TrimPrefix(string(kv.Key), h.prefix))
	}
	h.beat(ids, now)
	// In transactions of heartbeatsPerTxn records, each put only if its
	// record is as read; a transaction that finds one changed is done
	// again a record at a time.
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	flush := func() {
		resp, err := c.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err == nil && !resp.Succeeded {
			for i := range cmps {
				c.Txn(ctx).If(cmps[i]).Then(puts[i]).Commit()
			}
		}
		cmps, puts = cmps[:0], puts[:0]
	}
	for _, kv := range resp.Kvs {
		v := h.annotate(string(kv.Key), kv.Value, now)
		if string(v) == string(kv.Value) {
			continue
		}
		key := string(kv.Key)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision))
		puts = append(puts, clientv3.OpPut(key, string(v)))
		if len(cmps) == heartbeatsPerTxn {
			flush()
		}
	}
	if len(cmps) > 0 {
		flush()
	}
}

// heartbeatsPerTxn is how many records one heartbeat transaction writes
// (etcd takes at most 128 operations in one).
const heartbeatsPerTxn = 64

// healthKV is the simulator's view of etcd: every record it puts carries
// its node's heartbeat.
type healthKV struct {
	clientv3.KV
	h *heartbeats
}

func (k healthKV) Put(ctx context.Context, key, value string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return k.KV.Put(ctx, key, string(k.h.annotate(key, []byte(value), time.Now())), opts...)
}
