package sim

import (
	"cmp"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
)

const (
	// consensusPort is where consensus members' peer URLs point.
	consensusPort = 7834
	// releaseEvery is how many steps pass between two simulated releases.
	releaseEvery = 1000
	// maintenanceLabel is the label a Labels change adds or removes.
	maintenanceLabel = "maintenance"
)

// node is one simulated node: its current record and what the Sim knows
// about it beyond the record.
type node struct {
	// rec is the current record. Once written it is never modified, only
	// replaced, so that Ops can share it.
	rec     *apipb.Node
	control bool // consensus member and Kubernetes controller
	pod     int  // index of its pod prefix
	slot    int  // position in its bucket
}

// bucket holds nodes in an order that depends only on the sequence of adds
// and removes, never on map iteration, so that picks are deterministic.
type bucket []*node

func (b *bucket) add(n *node) {
	n.slot = len(*b)
	*b = append(*b, n)
}

// remove swaps the last node into n's slot.
func (b *bucket) remove(n *node) {
	last := (*b)[len(*b)-1]
	(*b)[n.slot] = last
	last.slot = n.slot
	*b = (*b)[:len(*b)-1]
}

// change is a planned Step: node n (new for Join) gets record rec (nil for
// Delete).
type change struct {
	kind Kind
	id   string
	n    *node
	rec  *apipb.Node
}

// bucketOf returns the bucket that holds a node with record rec.
func (s *Sim) bucketOf(n *node, rec *apipb.Node) *bucket {
	switch rec.State {
	case commonpb.NodeState_NODE_STATE_NEW:
		return &s.fresh
	case commonpb.NodeState_NODE_STATE_STANDBY:
		return &s.standby
	case commonpb.NodeState_NODE_STATE_UP:
		if n.control {
			return &s.upControl
		}
		return &s.upWorkers
	}
	return &s.decommissioned
}

// apply makes a planned change in memory, after etcd took it.
func (s *Sim) apply(c change) {
	switch {
	case c.kind == Join:
		s.pods++
		if c.n.control {
			s.controls++
		}
		c.n.rec = c.rec
		s.bucketOf(c.n, c.rec).add(c.n)
	case c.rec == nil:
		s.bucketOf(c.n, c.n.rec).remove(c.n)
	default:
		from, to := s.bucketOf(c.n, c.n.rec), s.bucketOf(c.n, c.rec)
		if from != to {
			from.remove(c.n)
			to.add(c.n)
		}
		c.n.rec = c.rec
	}
}

// all returns every node, in bucket order.
func (s *Sim) all() []*node {
	return slices.Concat(s.fresh, s.standby, s.upControl, s.upWorkers, s.decommissioned)
}

// live counts the nodes that are not decommissioned.
func (s *Sim) live() int {
	return len(s.fresh) + len(s.standby) + len(s.upControl) + len(s.upWorkers)
}

// slack is how far below Config.Nodes the live fleet may shrink, and how
// many decommissioned records may await deletion.
func (s *Sim) slack() int { return max(1, s.cfg.Nodes/10) }

// wantControls is how many control-plane nodes a fleet of n nodes has.
func wantControls(n int) int {
	switch {
	case n < 5:
		return 1
	case n < 50:
		return 3
	}
	return 5
}

// plan chooses change number step without making it. It draws from the
// generator and nothing else, so restoring the generator undoes it.
func (s *Sim) plan(step int64) change {
	up := len(s.upControl) + len(s.upWorkers)
	switch p := s.rng.IntN(100); {
	case p < 70 && up > 0:
		return s.planStatus(step)
	case p < 75 && up > 0:
		return s.planLabels()
	}
	if s.cfg.Steady && up > 0 {
		return s.planStatus(step)
	}
	if c, ok := s.planLifecycle(step); ok {
		return c
	}
	// Nothing in the lifecycle to do means the fleet is full and all UP,
	// so up > 0.
	return s.planStatus(step)
}

// planLifecycle picks a join, a state transition or a delete, weighted as
// the package documentation says; false if none is possible.
func (s *Sim) planLifecycle(step int64) (change, bool) {
	var decommission int
	if s.live() > s.cfg.Nodes-s.slack() && len(s.decommissioned) < s.slack() && len(s.upWorkers) > 0 {
		decommission = 1
	}
	weights := []struct {
		kind Kind
		w    int
	}{
		{Join, 2 * max(0, s.cfg.Nodes-s.live())},
		{Standby, 2 * len(s.fresh)},
		{Up, 2 * len(s.standby)},
		{Delete, 2 * len(s.decommissioned)},
		{Decommission, decommission},
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	if total == 0 {
		return change{}, false
	}
	r := s.rng.IntN(total)
	kind := Join
	for _, w := range weights {
		if r < w.w {
			kind = w.kind
			break
		}
		r -= w.w
	}
	switch kind {
	case Join:
		return s.planJoin(), true
	case Standby:
		n := s.pick(s.fresh)
		rec := clone(n.rec)
		rec.State = commonpb.NodeState_NODE_STATE_STANDBY
		return change{kind: Standby, id: rec.Id, n: n, rec: rec}, true
	case Up:
		n := s.pick(s.standby)
		return change{kind: Up, id: n.rec.Id, n: n, rec: s.upRecord(n, n.rec, step)}, true
	case Delete:
		n := s.pick(s.decommissioned)
		return change{kind: Delete, id: n.rec.Id, n: n}, true
	default:
		n := s.pick(s.upWorkers)
		rec := clone(n.rec)
		rec.State = commonpb.NodeState_NODE_STATE_DECOMMISSIONED
		return change{kind: Decommission, id: rec.Id, n: n, rec: rec}, true
	}
}

// pick returns a random node of b, which must not be empty.
func (s *Sim) pick(b bucket) *node { return b[s.rng.IntN(len(b))] }

// pickUp returns a random UP node; there must be one.
func (s *Sim) pickUp() *node {
	i := s.rng.IntN(len(s.upControl) + len(s.upWorkers))
	if i < len(s.upControl) {
		return s.upControl[i]
	}
	return s.upWorkers[i-len(s.upControl)]
}

// planJoin creates a node in state NEW with its labels. It is a
// control-plane node while the fleet has fewer than it should.
func (s *Sim) planJoin() change {
	n := &node{control: s.controls < wantControls(s.cfg.Nodes), pod: s.pods}
	rec := &apipb.Node{
		Id:     fmt.Sprintf("metropolis-%016x%016x", s.rng.Uint64(), s.rng.Uint64()),
		Roles:  &commonpb.NodeRoles{},
		State:  commonpb.NodeState_NODE_STATE_NEW,
		Labels: &commonpb.NodeLabels{},
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	types := []string{"m1.small", "m1.large", "c2.xlarge"}
	setLabel(rec.Labels, "topology.kubernetes.io/zone", zones[s.rng.IntN(len(zones))])
	setLabel(rec.Labels, "node.kubernetes.io/instance-type", types[s.rng.IntN(len(types))])
	return change{kind: Join, id: rec.Id, n: n, rec: rec}
}

// upRecord returns a copy of rec that is UP, as node n comes up at change
// number step: with roles, status and cluster networking.
func (s *Sim) upRecord(n *node, rec *apipb.Node, step int64) *apipb.Node {
	rec = clone(rec)
	rec.State = commonpb.NodeState_NODE_STATE_UP
	addr := s.address()
	rec.Status = &commonpb.NodeStatus{
		ExternalAddress: addr,
		Timestamp:       timestamppb.New(clock(step)),
		Version:         s.version(step),
		BootId:          s.bytes(16),
	}
	if n.control {
		// The consensus grows one member at a time; a member's peers are
		// the members that were up when it joined, and itself.
		var peers []*commonpb.NodeRoles_ConsensusMember_Peer
		for _, m := range s.upControl {
			peers = append(peers, peer(m.rec.Id, m.rec.Status.ExternalAddress))
		}
		peers = append(peers, peer(rec.Id, addr))
		slices.SortFunc(peers, func(a, b *commonpb.NodeRoles_ConsensusMember_Peer) int { return cmp.Compare(a.Name, b.Name) })
		rec.Roles = &commonpb.NodeRoles{
			ConsensusMember:      &commonpb.NodeRoles_ConsensusMember{Peers: peers},
			KubernetesController: &commonpb.NodeRoles_KubernetesController{},
		}
		rec.Status.RunningCurator = &commonpb.NodeStatus_RunningCurator{Port: curator.DefaultPort}
	} else {
		rec.Roles = &commonpb.NodeRoles{KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{}}
	}
	rec.Clusternet = &commonpb.NodeClusterNetworking{
		WireguardPubkey: base64.StdEncoding.EncodeToString(s.bytes(32)),
		Prefixes:        prefixes(addr, n.pod),
	}
	return rec
}

// planStatus changes the status of a random UP node at change number step:
// a heartbeat, a new address (workers only) or a reboot.
func (s *Sim) planStatus(step int64) change {
	n := s.pickUp()
	rec := clone(n.rec)
	rec.Status.Timestamp = timestamppb.New(clock(step))
	switch p := s.rng.IntN(100); {
	case p < 75:
		// A heartbeat: the timestamp alone.
	case p < 90:
		if !n.control {
			rec.Status.ExternalAddress = s.address()
			rec.Clusternet.Prefixes = prefixes(rec.Status.ExternalAddress, n.pod)
		}
	default:
		rec.Status.BootId = s.bytes(16)
		rec.Status.Version = s.version(step)
	}
	return change{kind: Status, id: rec.Id, n: n, rec: rec}
}

// planLabels adds the maintenance label to a random UP node, or removes it.
func (s *Sim) planLabels() change {
	n := s.pickUp()
	rec := clone(n.rec)
	if !deleteLabel(rec.Labels, maintenanceLabel) {
		setLabel(rec.Labels, maintenanceLabel, "true")
	}
	return change{kind: Labels, id: rec.Id, n: n, rec: rec}
}

// address returns a random external address in 10.0.0.0/9, outside the
// pod prefixes.
func (s *Sim) address() string {
	return fmt.Sprintf("10.%d.%d.%d", s.rng.IntN(128), s.rng.IntN(256), 1+s.rng.IntN(254))
}

// bytes returns n random bytes.
func (s *Sim) bytes(n int) []byte {
	b := make([]byte, 0, n+8)
	for len(b) < n {
		b = binary.LittleEndian.AppendUint64(b, s.rng.Uint64())
	}
	return b[:n]
}

// version returns the release current at change number step: v0.1.P with
// P = 1 at first, advancing every releaseEvery steps, built from a commit
// that depends only on the seed and P.
func (s *Sim) version(step int64) *versionpb.Version {
	patch := 1 + step/releaseEvery
	h := sha1.Sum(fmt.Appendf(nil, "nodewatch sim %d v0.1.%d", s.cfg.Seed, patch))
	return &versionpb.Version{
		Release: &versionpb.Version_Release{Major: 0, Minor: 1, Patch: patch},
		GitInformation: &versionpb.Version_GitInformation{
			CommitHash:     hex.EncodeToString(h[:]),
			BuildTreeState: versionpb.Version_GitInformation_BUILD_TREE_STATE_CLEAN,
		},
	}
}

// prefixes returns the cluster networking prefixes of a node at addr with
// pod prefix number pod: its own address and a /24 for its pods, from
// 10.128.0.0/9.
func prefixes(addr string, pod int) []*commonpb.NodeClusterNetworking_Prefix {
	pod %= 128 * 256
	return []*commonpb.NodeClusterNetworking_Prefix{
		{Cidr: addr + "/32"},
		{Cidr: fmt.Sprintf("10.%d.%d.0/24", 128+pod/256, pod%256)},
	}
}

func peer(id, addr string) *commonpb.NodeRoles_ConsensusMember_Peer {
	return &commonpb.NodeRoles_ConsensusMember_Peer{Name: id, Url: fmt.Sprintf("https://%s:%d", addr, consensusPort)}
}

// setLabel sets key to value, keeping pairs sorted by key.
func setLabel(l *commonpb.NodeLabels, key, value string) {
	for _, p := range l.Pairs {
		if p.Key == key {
			p.Value = value
			return
		}
	}
	l.Pairs = append(l.Pairs, &commonpb.NodeLabels_Pair{Key: key, Value: value})
	slices.SortFunc(l.Pairs, func(a, b *commonpb.NodeLabels_Pair) int { return cmp.Compare(a.Key, b.Key) })
}

// deleteLabel removes key and reports whether it was there.
func deleteLabel(l *commonpb.NodeLabels, key string) bool {
	n := len(l.Pairs)
	l.Pairs = slices.DeleteFunc(l.Pairs, func(p *commonpb.NodeLabels_Pair) bool { return p.Key == key })
	return len(l.Pairs) != n
}

func clone(rec *apipb.Node) *apipb.Node { return proto.Clone(rec).(*apipb.Node) }
