// Package curator speaks the Watch RPC of the Monogon Metropolis Curator,
// from both ends.
//
// Client is the source behind `nodewatch nodes` and `nodewatch node ID`: it
// turns a Curator Watch stream into nodeset batches, and owns everything
// the wire leaves to the client: following a non-leader to the leader,
// reconnecting with capped backoff, moving across endpoints, and handing
// over the full state again after a reconnect so that the follower prints
// only what changed meanwhile.
//
// Server is `nodewatch serve`: a Curator-compatible Watch server over node
// records kept in etcd. However many streams it serves, it reads etcd
// through one list-then-watch (internal/etcdkv), keeps the current nodes in
// memory and hands each stream its own coalescing mailbox, so a slow client
// never holds up etcd, the server or the other clients, and its memory is
// bounded by the number of nodes.
//
// Records, events and printed objects share one encoding, defined here:
// DecodeRecord, EncodeRecord and Object.
package curator
