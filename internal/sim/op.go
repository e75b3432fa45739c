package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/enum"
)

// Kind is the kind of change a Step makes.
type Kind int

// The kinds of change, in lifecycle order.
const (
	// Join writes a new node in state NEW.
	Join Kind = iota + 1
	// Standby moves a NEW node to STANDBY.
	Standby
	// Up moves a STANDBY node to UP, with roles, status and networking.
	Up
	// Status changes the status of an UP node: timestamp, address or boot.
	Status
	// Labels changes the labels of an UP node.
	Labels
	// Decommission moves an UP worker to DECOMMISSIONED.
	Decommission
	// Delete deletes the record of a DECOMMISSIONED node.
	Delete
)

// Kinds returns every Kind in lifecycle order.
func Kinds() []Kind { return kindNames.Values() }

// kindNames are the lower-case names of the kinds, e.g. "decommission".
var kindNames = enum.Names[Kind]{"", "join", "standby", "up", "status", "labels", "decommission", "delete"}

// String returns the lower-case name of k, e.g. "decommission".
func (k Kind) String() string { return kindNames.String(k) }

// Op is one change a Step made in etcd.
type Op struct {
	Kind Kind
	// Step numbers the changes of a Sim from 1.
	Step int64
	// Time is the simulated time of the change: Epoch + Step*StepInterval.
	Time time.Time
	// ID is the node's id; Key is Prefix + ID.
	ID, Key string
	// Node is the record written, nil for Delete. It is shared with the
	// Sim, which never modifies a record once written; callers must not
	// modify it either.
	Node *apipb.Node
	// Value holds the bytes written, nil for Delete.
	Value []byte
	// Rev is the etcd revision of the write.
	Rev int64
}

// Stats summarises what a Sim has done so far.
type Stats struct {
	// Steps counts the changes made by Step.
	Steps int64
	// Time is the simulated clock.
	Time time.Time
	// Changes counts the changes by kind.
	Changes map[Kind]int64
	// Records counts the nodes whose records the Sim keeps in etcd (or is
	// about to write), by state.
	Records map[commonpb.NodeState]int
}

// String describes st in one line, e.g. "12 changes (9 status, 1 join, …),
// 10 nodes (9 up, 1 new) at 2026-01-01T00:00:12Z".
func (st Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d changes", st.Steps)
	var parts []string
	for _, k := range Kinds() {
		if n := st.Changes[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	total := 0
	parts = parts[:0]
	for _, state := range []commonpb.NodeState{
		commonpb.NodeState_NODE_STATE_NEW,
		commonpb.NodeState_NODE_STATE_STANDBY,
		commonpb.NodeState_NODE_STATE_UP,
		commonpb.NodeState_NODE_STATE_DECOMMISSIONED,
	} {
		if n := st.Records[state]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(strings.TrimPrefix(state.String(), "NODE_STATE_"))))
		}
	}
	fmt.Fprintf(&b, ", %d nodes", total)
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " at %s", st.Time.UTC().Format(time.RFC3339))
	return b.String()
}
