// Package sim simulates a fleet of Metropolis nodes by writing their
// records into etcd, so that `nodewatch serve`, `key` and `nodes` have a
// realistic, changing cluster to follow without any real machines: for
// demos (`serve --dev`, `nodewatch sim`), load and tests.
//
// # Records
//
// A node's record lives at Prefix + id (default prefix "/nodes/"); its value
// is the apipb.Node message as protobuf JSON with proto field names, or, with
// Format Binary, as binary protobuf: the two encodings `serve` accepts.
// Ids are "metropolis-" followed by 32 lowercase hex digits.
//
// # Determinism
//
// Every choice is drawn from one PCG generator seeded with Config.Seed, and
// every time value comes from a simulated clock that reads Epoch plus one
// StepInterval per change made, never from the wall clock. The same Config
// therefore yields the same sequence of etcd writes, byte for byte, on every
// run and machine (JSON is compacted, so the protojson library's deliberate
// whitespace jitter cannot leak in; binary protobuf is marshalled
// deterministically). Only the pacing of Run depends on real time. A Step
// whose write fails changes nothing, so retrying it performs the same write.
//
// # Lifecycle
//
// Populate writes the initial fleet: Config.Nodes nodes, all UP, as in a
// settled cluster. The first few are control-plane nodes (1 below 5 nodes,
// 3 below 50, else 5): consensus_member and kubernetes_controller, with the
// Curator running on port 7835. The rest are kubernetes_worker nodes.
//
// Each Step then makes one change, chosen as follows:
//
//   - 70%: a status change of a random UP node: mostly a heartbeat (new
//     timestamp); 15% of them a new external address (workers only, since a
//     consensus member keeps its address); 10% a reboot (new boot_id, and the
//     release current at that simulated time: v0.1.1 at first, one patch
//     release more every 1000 steps).
//   - 5%: a label change of a random UP node (the "maintenance" label is
//     added or removed).
//   - 25%, or whenever neither of the above is possible: one lifecycle
//     change, picked with weights: join a new node as NEW (2 per node the
//     fleet is short of Config.Nodes), NEW to STANDBY (2 per NEW node),
//     STANDBY to UP (2 per STANDBY node), delete a DECOMMISSIONED record (2
//     per such record), and decommission a random UP worker (1, only while
//     the fleet is above Nodes minus the slack and fewer than the slack are
//     awaiting deletion). The slack is Nodes/10, at least 1. Control-plane
//     nodes are never decommissioned, as a real cluster guards its quorum.
//
// With Config.Steady, the lifecycle changes are left out (their 25% are
// status changes): the fleet stays at Nodes, all UP.
//
// So the number of live (not decommissioned) nodes stays between Nodes minus
// the slack and Nodes, and the number of records at most Nodes plus the
// slack. A node joins with its labels only; it gains roles, status and
// cluster networking (WireGuard key, prefixes) when it comes UP.
package sim
