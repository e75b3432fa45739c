// Package view turns a source's batches of changes (package flow) into the
// events that nodewatch prints: it keeps the view of the source a reader
// has, and prints what differs from it.
//
// A source (the Curator client, the etcd watcher) only knows what the
// cluster looks like now. Users want to know what changed since the last
// line they read, with jq deciding which objects matter (Filter) and which
// changes count (Equals). The Follower keeps the set of objects it has
// printed, ordered by id, and compares every incoming state with it. That
// gives three guarantees the rest of nodewatch builds on:
//
//   - Events within a batch come in ascending id order, so output is
//     deterministic for a given input.
//   - A resync (the source lists everything again after a reconnect or a
//     compaction) prints only real differences, deletes included.
//   - The cost of a batch grows with the number of ids it changes, not with
//     the size of the set; memory grows with the number of ids, never with
//     the number of updates (see internal/handoff).
package view
