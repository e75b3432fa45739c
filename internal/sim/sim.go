package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/enum"
)

const (
	// DefaultNodes is the fleet size when Config.Nodes is not positive.
	DefaultNodes = 10
	// MaxTxnOps bounds the puts Populate sends in one transaction, well
	// below etcd's default --max-txn-ops of 128.
	MaxTxnOps = 64
	// StepInterval is how far the simulated clock advances per change.
	StepInterval = time.Second

	// epochUnix is Epoch in Unix seconds: 2026-01-01T00:00:00Z.
	epochUnix = 1767225600
	// pcgStream is the second PCG seed word; the first is Config.Seed.
	pcgStream = 0x6e6f646577617463 // "nodewatc"
)

// Epoch returns the simulated time before the first change,
// 2026-01-01T00:00:00Z: Populate stamps the initial fleet with it.
func Epoch() time.Time { return time.Unix(epochUnix, 0).UTC() }

// Format is how a record is encoded in etcd.
type Format int

const (
	// JSON is protobuf JSON with proto field names, compacted.
	JSON Format = iota
	// Binary is binary protobuf, marshalled deterministically.
	Binary
)

// formatNames are the names of the formats, as --format takes them.
var formatNames = enum.Names[Format]{"json", "binary"}

// String returns "json" or "binary".
func (f Format) String() string { return formatNames.String(f) }

// ParseFormat parses "json" or "binary".
func ParseFormat(s string) (Format, error) { return formatNames.Parse("record format", s, false) }

// Formats returns the names of the record formats, as --format takes them.
func Formats() []string { return formatNames.All() }

// Config describes a simulated fleet.
type Config struct {
	// Nodes is the fleet size the simulation stays near; not positive means
	// DefaultNodes.
	Nodes int
	// Seed selects the simulation: the same seed, the same writes.
	Seed int64
	// Prefix is prepended to node ids to make etcd keys; empty means
	// curator.DefaultPrefix.
	Prefix string
	// Format is how records are encoded; the zero value is JSON.
	Format Format
	// Steady keeps the fleet at Nodes, all UP: no node joins, is
	// decommissioned or leaves; Steps change statuses and labels only
	// (serve --dev, unless asked to churn: a demo's fleet holds the size
	// it announces).
	Steady bool
}

// Sim is a simulated fleet. It keeps in memory the records it has written
// and changes them one write at a time.
//
// A Sim is not safe for concurrent use: call its methods from one goroutine
// (Run included). It never writes outside Config.Prefix and does not read
// etcd, so it does not notice (and may overwrite) records others write
// under that prefix; to start from a clean slate, delete the prefix before
// Populate.
type Sim struct {
	cfg Config
	pcg *rand.PCG  // generator state, restored when a Step fails
	rng *rand.Rand // draws from pcg; holds no state of its own
	// step counts successful changes; the simulated clock derives from it.
	step int64

	// Every node whose record exists is in exactly one bucket, by state
	// (and, when UP, by role); see bucketOf.
	fresh, standby, upControl, upWorkers, decommissioned bucket

	controls int // control-plane nodes created; they are never decommissioned
	pods     int // pod prefixes handed out
	changes  map[Kind]int64
}

// New returns a Sim for cfg, with an empty fleet. It neither connects nor
// writes; see Populate.
func New(cfg Config) *Sim {
	if cfg.Nodes <= 0 {
		cfg.Nodes = DefaultNodes
	}
	if cfg.Prefix == "" {
		cfg.Prefix = curator.DefaultPrefix
	}
	pcg := rand.NewPCG(uint64(cfg.Seed), pcgStream)
	return &Sim{cfg: cfg, pcg: pcg, rng: rand.New(pcg), changes: map[Kind]int64{}}
}

// Config returns the Sim's configuration, defaults filled in.
func (s *Sim) Config() Config { return s.cfg }

// Now returns the simulated clock: Epoch plus StepInterval per change made.
func (s *Sim) Now() time.Time { return clock(s.step) }

// clock returns the simulated time of change number step.
func clock(step int64) time.Time { return Epoch().Add(time.Duration(step) * StepInterval) }

// Stats returns what the Sim has done so far.
func (s *Sim) Stats() Stats {
	st := Stats{Steps: s.step, Time: s.Now(), Changes: map[Kind]int64{}, Records: map[commonpb.NodeState]int{}}
	for k, n := range s.changes {
		st.Changes[k] = n
	}
	for _, n := range s.all() {
		st.Records[n.rec.State]++
	}
	return st
}

// Populate adds UP nodes until the fleet has Config.Nodes live nodes, then
// writes the record of every node the Sim holds, in id order, in
// transactions of at most MaxTxnOps puts. It is meant to be called once,
// before the first Step; it does not advance the simulated clock. It blocks
// until etcd has taken every transaction or ctx ends. On error some
// transactions may have been applied; calling Populate again writes the same
// records again.
func (s *Sim) Populate(ctx context.Context, kv clientv3.KV) error {
	for s.live() < s.cfg.Nodes {
		j := s.planJoin()
		s.apply(j)
		s.apply(change{kind: Up, id: j.id, n: j.n, rec: s.upRecord(j.n, j.rec, s.step)})
	}
	nodes := s.all()
	slices.SortFunc(nodes, func(a, b *node) int { return strings.Compare(a.rec.Id, b.rec.Id) })
	for len(nodes) > 0 {
		batch := nodes[:min(len(nodes), MaxTxnOps)]
		nodes = nodes[len(batch):]
		ops := make([]clientv3.Op, 0, len(batch))
		for _, n := range batch {
			v, err := s.encode(n.rec)
			if err != nil {
				return err
			}
			ops = append(ops, clientv3.OpPut(s.cfg.Prefix+n.rec.Id, string(v)))
		}
		if _, err := kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("populate %q: %w", s.cfg.Prefix, err)
		}
	}
	return nil
}

// Step makes one change (see the package documentation for how it is
// chosen), writes it to etcd with one Put or Delete, and returns it. It
// blocks until etcd has answered or ctx ends. If the write fails, Step
// returns the error and the Sim is left as it was, so that the next Step
// makes the same change; the write may still have been applied if the error
// came after etcd received it.
func (s *Sim) Step(ctx context.Context, kv clientv3.KV) (Op, error) {
	saved := *s.pcg
	step := s.step + 1
	c := s.plan(step)
	op := Op{Kind: c.kind, Step: step, Time: clock(step), ID: c.id, Key: s.cfg.Prefix + c.id, Node: c.rec}
	if c.rec == nil {
		resp, err := kv.Delete(ctx, op.Key)
		if err != nil {
			*s.pcg = saved
			return Op{}, fmt.Errorf("step %d: delete %q: %w", step, op.Key, err)
		}
		op.Rev = resp.Header.Revision
	} else {
		v, err := s.encode(c.rec)
		if err != nil {
			*s.pcg = saved
			return Op{}, fmt.Errorf("step %d: %w", step, err)
		}
		resp, err := kv.Put(ctx, op.Key, string(v))
		if err != nil {
			*s.pcg = saved
			return Op{}, fmt.Errorf("step %d: put %q: %w", step, op.Key, err)
		}
		op.Value, op.Rev = v, resp.Header.Revision
	}
	s.apply(c)
	s.step = step
	s.changes[c.kind]++
	return op, nil
}

// Run calls Step at most rate times per second (rate <= 0: as fast as etcd
// takes the writes) until duration has passed (duration <= 0: no limit) or
// ctx ends. Pacing uses a ticker: when etcd is slower than rate, Run goes as
// fast as etcd allows and does not catch up later. Run blocks until it is
// done; it returns nil when duration has passed, ctx.Err() when ctx ends
// first, and Step's error when a write fails.
func (s *Sim) Run(ctx context.Context, kv clientv3.KV, rate float64, duration time.Duration) error {
	return s.RunSteps(ctx, kv, rate, duration, 0)
}

// RunSteps is Run that also stops, returning nil, once it has made steps
// changes (steps <= 0: no limit).
func (s *Sim) RunSteps(ctx context.Context, kv clientv3.KV, rate float64, duration time.Duration, steps int64) error {
	var end <-chan time.Time
	if duration > 0 {
		t := time.NewTimer(duration)
		defer t.Stop()
		end = t.C
	}
	var tick <-chan time.Time
	if rate > 0 {
		if interval := time.Duration(float64(time.Second) / rate); interval > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
	}
	for n := int64(0); steps <= 0 || n < steps; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-end:
			return nil
		default:
		}
		if tick != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-end:
				return nil
			case <-tick:
			}
		}
		if _, err := s.Step(ctx, kv); err != nil {
			return err
		}
	}
	return nil
}

// encode returns the value stored for rec.
func (s *Sim) encode(rec *apipb.Node) ([]byte, error) {
	switch s.cfg.Format {
	case JSON:
		return curator.EncodeRecord(rec)
	case Binary:
		return curator.EncodeRecordBinary(rec)
	}
	return nil, fmt.Errorf("encode %s: unknown record format %v", rec.Id, s.cfg.Format)
}
