//go:build linux

// Package faults is test scaffolding: the machinery of nodewatch's fault
// suite (make faults): a 3-member etcd cluster whose members are separate processes
// that can be killed, restarted and paused, a seeded random workload that
// retries through faults, nodewatch processes whose every printed line is
// replayed by a replay.Checker, a slow Curator client, and a run that
// injects faults at random and then waits for every stream to equal the
// source. Raft traffic between members, and the connections of some
// streams and of serve, go through netfault forwarders, so that a member
// can be cut off from its peers and a connection can go silent.
//
// A run also measures, for each fault, how long the streams it concerns
// took to recover (from the fault to the first line showing a marker
// written after it), and the same for `etcdctl watch` run beside them
// under the same fault, when a Config names etcdctl.
//
// What a Run guarantees when it reports no violation and no divergence:
// every line every stream printed obeyed the stream's rules (each
// replay.Checker accepted it; the Curator client saw a well-formed Watch
// stream), and once the faults stopped and every process ran again, each
// stream's replayed state became exactly the source's real state, read from
// etcd (keys as `key` prints their objects, nodes as `nodes` prints them),
// within a generous deadline. Faults are chosen from a seed, so a failing
// run names the seed that injects the same faults again; the timing under
// them is the machine's, so a reproduction is likely, not certain.
package faults
