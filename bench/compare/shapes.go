//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
	"github.com/nodewatch/nodewatch/internal/sim"
)

// shape is a kind of data the rows measure: the simulator's fleet, or
// node records of about one size, since what a tool costs per record
// depends on the record's size (users' records run from a bare heartbeat
// to a node with dozens of feature labels).
type shape struct {
	name string // as -shapes takes it
	size int    // a record's bytes (its value); 0: the simulator's records
}

// shapes are every shape, in the order the rows run them.
var shapes = []shape{{"sim", 0}, {"200", 200}, {"600", 600}, {"4k", 4096}}

// label names the shape in a line of the table.
func (s shape) label() string {
	switch {
	case s.size == 0:
		return "sim records"
	case s.size%1024 == 0:
		return fmt.Sprintf("%d KiB records", s.size/1024)
	}
	return fmt.Sprintf("%d B records", s.size)
}

// parseShapes parses -shapes: names of shapes, comma-separated.
func parseShapes(list string) ([]shape, error) {
	var out []shape
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		i := slices.IndexFunc(shapes, func(s shape) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown shape %q (want sim, 200, 600 or 4k)", name)
		}
		if !slices.Contains(out, shapes[i]) {
			out = append(out, shapes[i])
		}
	}
	slices.SortFunc(out, func(a, b shape) int { return a.size - b.size })
	return out, nil
}

// Record sizes are within sizeSlack of their shape's size.
const sizeSlack = 0.15

// A sized record is the simulator's UP record grown with labels until it
// has its size: Kubernetes' well-known labels first, then the features
// Node Feature Discovery labels a node with, then inventory labels (as
// many as it takes). Below labelsFrom bytes, a record is a bare one: id,
// role, state and a heartbeat, as a small fleet manager writes.
const labelsFrom = 400

// wellKnown are the labels a sized record starts with, Kubernetes' own,
// each value drawn from a generator.
var wellKnown = []struct {
	key   string
	value func(*rand.Rand) string
}{
	{"topology.kubernetes.io/zone", func(r *rand.Rand) string { return []string{"zone-a", "zone-b", "zone-c"}[r.IntN(3)] }},
	{"node.kubernetes.io/instance-type", func(r *rand.Rand) string { return []string{"m6i.large", "c6i.large", "r6i.large"}[r.IntN(3)] }},
	{"topology.kubernetes.io/region", func(*rand.Rand) string { return "eu-west-1" }},
	{"kubernetes.io/arch", func(*rand.Rand) string { return "amd64" }},
	{"kubernetes.io/os", func(*rand.Rand) string { return "linux" }},
	{"example.com/rack", func(r *rand.Rand) string { return fmt.Sprintf("rack-%03d", r.IntN(1000)) }},
}

// features are the labels Node Feature Discovery adds, "true" each.
var features = func() []string {
	var fs []string
	for _, f := range []string{"ADX", "AESNI", "AVX", "AVX2", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512F", "AVX512VL",
		"AVX512VNNI", "BMI1", "BMI2", "CLMUL", "CMPXCHG16B", "ERMS", "F16C", "FMA3", "FSRM", "FXSR", "GFNI",
		"HYPERVISOR", "LAHF", "MOVBE", "OSXSAVE", "POPCNT", "RDRAND", "RDSEED", "RDTSCP", "SHA", "SSE3",
		"SSE4", "SSE42", "SSSE3", "VAES", "VPCLMULQDQ", "X87", "XGETBV1", "XSAVE", "XSAVEC", "XSAVEOPT"} {
		fs = append(fs, "feature.node.kubernetes.io/cpu-cpuid."+f)
	}
	for _, k := range []string{"NO_HZ", "NO_HZ_FULL", "NO_HZ_IDLE", "PREEMPT", "X86", "IOMMU", "HUGETLBFS", "NUMA"} {
		fs = append(fs, "feature.node.kubernetes.io/kernel-config."+k)
	}
	return fs
}()

// labelAt returns label j of a sized record, its value drawn from rng;
// each label's value has the same length in every record, so that
// records of a shape have nearly the same size.
func labelAt(j int, rng *rand.Rand) *commonpb.NodeLabels_Pair {
	switch {
	case j < len(wellKnown):
		return &commonpb.NodeLabels_Pair{Key: wellKnown[j].key, Value: wellKnown[j].value(rng)}
	case j < len(wellKnown)+len(features):
		return &commonpb.NodeLabels_Pair{Key: features[j-len(wellKnown)], Value: "true"}
	}
	return &commonpb.NodeLabels_Pair{Key: fmt.Sprintf("inventory.example.com/disk-%03d", j), Value: fmt.Sprintf("%016x", rng.Uint64())}
}

// fleet is node records of one size that the harness writes and
// changes. Its records are generated from a seed, so every run of a row
// writes the same data.
type fleet struct {
	size   int
	labels int // labels per record
	rng    *rand.Rand
	i      int // records made
}

// newFleet returns a fleet of records of about size bytes.
func newFleet(size int, seed int64) *fleet {
	f := &fleet{size: size, rng: rand.New(rand.NewPCG(uint64(seed), 0x73686170))}
	if size < labelsFrom {
		return f
	}
	// As many labels as bring a record nearest to size (the probe's id
	// and variable fields are drawn as every record's are).
	sizeWith := func(labels int) int {
		probe := &fleet{size: size, labels: labels, rng: rand.New(rand.NewPCG(1, 2))}
		b, _ := curator.EncodeRecord(probe.next())
		return len(b)
	}
	for f.labels = 0; ; f.labels++ {
		if more := sizeWith(f.labels + 1); more > size {
			if more-size < size-sizeWith(f.labels) {
				f.labels++
			}
			return f
		}
	}
}

// next returns the fleet's next record: half of them UP, the others
// STANDBY or DECOMMISSIONED (a filter on the state selects about half).
func (f *fleet) next() *apipb.Node {
	f.i++
	n := &apipb.Node{
		Id:    fmt.Sprintf("metropolis-%016x%016x", f.rng.Uint64(), f.rng.Uint64()),
		Roles: &commonpb.NodeRoles{KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{}},
		Status: &commonpb.NodeStatus{
			ExternalAddress: f.address(),
			Timestamp:       timestamppb.New(sim.Epoch()),
		},
		State: []commonpb.NodeState{commonpb.NodeState_NODE_STATE_UP, commonpb.NodeState_NODE_STATE_UP,
			commonpb.NodeState_NODE_STATE_STANDBY, commonpb.NodeState_NODE_STATE_DECOMMISSIONED}[f.rng.IntN(4)],
	}
	if f.size < labelsFrom {
		return n
	}
	n.Status.BootId = f.bytes(16)
	n.Status.Version = &versionpb.Version{
		Release: &versionpb.Version_Release{Major: 0, Minor: 1, Patch: 1},
		GitInformation: &versionpb.Version_GitInformation{
			CommitHash:     fmt.Sprintf("%040x", f.bytes(20)),
			BuildTreeState: versionpb.Version_GitInformation_BUILD_TREE_STATE_CLEAN,
		},
	}
	n.Clusternet = &commonpb.NodeClusterNetworking{
		WireguardPubkey: base64.StdEncoding.EncodeToString(f.bytes(32)),
		Prefixes: []*commonpb.NodeClusterNetworking_Prefix{
			{Cidr: n.Status.ExternalAddress + "/32"},
			{Cidr: fmt.Sprintf("10.%d.%d.0/24", 128+f.i/256%128, f.i%256)},
		},
	}
	n.Labels = &commonpb.NodeLabels{}
	for j := range f.labels {
		n.Labels.Pairs = append(n.Labels.Pairs, labelAt(j, f.rng))
	}
	return n
}

// address returns an external address in 10.0.0.0/9.
func (f *fleet) address() string {
	return fmt.Sprintf("10.%d.%d.%d", f.rng.IntN(128), f.rng.IntN(256), 1+f.rng.IntN(254))
}

func (f *fleet) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(f.rng.Uint32())
	}
	return b
}

// writeFleet empties prefix and writes n records of size bytes under it,
// in transactions of sim.MaxTxnOps puts, as the simulator populates; it
// returns the records written if keep is set (else nil) and the bytes of
// keys and values. Records are made in order, from the seed; a few
// transactions are in flight at once, so that making them and etcd's
// taking them overlap.
func writeFleet(ctx context.Context, e *etcdServer, prefix string, n, size int, seed int64, keep bool) ([]*apipb.Node, int64, error) {
	if _, err := e.client.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return nil, 0, err
	}
	batches := make(chan []clientv3.Op, 4)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range cap(batches) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ops := range batches {
				if _, err := e.client.Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- fmt.Errorf("write %d B records under %q: %w", size, prefix, err)
					for range batches {
					}
					return
				}
			}
		}()
	}
	f := newFleet(size, seed)
	var kept []*apipb.Node
	var total int64
	var err error
	for done := 0; done < n && err == nil; {
		ops := make([]clientv3.Op, 0, sim.MaxTxnOps)
		for ; done < n && len(ops) < sim.MaxTxnOps; done++ {
			node := f.next()
			var v []byte
			if v, err = curator.EncodeRecord(node); err != nil {
				break
			}
			ops = append(ops, clientv3.OpPut(prefix+node.Id, string(v)))
			total += int64(len(prefix) + len(node.Id) + len(v))
			if keep {
				kept = append(kept, node)
			}
		}
		if err == nil {
			batches <- ops
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	return kept, total, err
}

// A change to a record is, as a fleet's agents and controllers make them:
const (
	flipPercent      = 20 // its state flips between UP and STANDBY
	heartbeatPercent = 60 // a heartbeat: a new status timestamp
	addressPercent   = 5  // a new external address
	// and the rest (15%) puts the same bytes again, which etcd makes a
	// revision of and etcdctl prints, and nodewatch must not.
)

// changer makes changes to some records of a fleet: those a writer owns.
// Each writer changes only its own records, so that a put of the same
// bytes is the same as what etcd holds, whatever the writers' order.
type changer struct {
	prefix string
	nodes  []*apipb.Node
	values [][]byte
	rng    *rand.Rand
	clock  int64 // seconds after sim.Epoch of the last heartbeat
}

func newChanger(prefix string, nodes []*apipb.Node, seed int64) (*changer, error) {
	c := &changer{prefix: prefix, nodes: nodes, rng: rand.New(rand.NewPCG(uint64(seed), 0x6368616e))}
	for _, n := range nodes {
		v, err := curator.EncodeRecord(n)
		if err != nil {
			return nil, err
		}
		c.values = append(c.values, v)
	}
	return c, nil
}

// change changes record i and returns its put.
func (c *changer) change(i int) (clientv3.Op, error) {
	n := c.nodes[i]
	switch p := c.rng.IntN(100); {
	case p < flipPercent:
		n = proto.Clone(n).(*apipb.Node)
		if n.State == commonpb.NodeState_NODE_STATE_UP {
			n.State = commonpb.NodeState_NODE_STATE_STANDBY
		} else {
			n.State = commonpb.NodeState_NODE_STATE_UP
		}
	case p < flipPercent+heartbeatPercent:
		n = proto.Clone(n).(*apipb.Node)
		c.clock++
		n.Status.Timestamp = timestamppb.New(sim.Epoch().Add(time.Duration(c.clock) * time.Second))
	case p < flipPercent+heartbeatPercent+addressPercent:
		n = proto.Clone(n).(*apipb.Node)
		n.Status.ExternalAddress = fmt.Sprintf("10.%d.%d.%d", c.rng.IntN(128), c.rng.IntN(256), 1+c.rng.IntN(254))
	default:
		return clientv3.OpPut(c.prefix+n.Id, string(c.values[i])), nil
	}
	v, err := curator.EncodeRecord(n)
	if err != nil {
		return clientv3.Op{}, err
	}
	c.nodes[i], c.values[i] = n, v
	return clientv3.OpPut(c.prefix+n.Id, string(v)), nil
}
