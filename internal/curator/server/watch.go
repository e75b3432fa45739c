package server

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// Watch serves one Watch stream. nodes_in_cluster: the current
// nodes in id order, in events of at most curator.MaxEventSize, the last one
// marked PROGRESS_LAST_BACKLOGGED (an empty event with the marker when
// there are no nodes); then one event per change, holding one node or one
// tombstone. node_in_cluster: nothing until the node exists, then its
// state, its changes, and a tombstone when it is deleted. Encoded nodes are
// shared between streams and never modified.
//
// Errors: codes.InvalidArgument for a node id that nodeIDProblem refuses
// (empty, too long, not printable UTF-8, containing '/'),
// codes.Unimplemented for an unset kind, codes.Unavailable once Run
// has returned; the stream's own context ending returns its status.
func (s *Server) Watch(req *apipb.WatchRequest, srv apipb.Curator_WatchServer) (err error) {
	ctx := srv.Context()
	st := s.openStream(ctx, "Watch")
	var id string
	switch k := req.GetKind().(type) {
	case *apipb.WatchRequest_NodesInCluster_:
	case *apipb.WatchRequest_NodeInCluster_:
		id = k.NodeInCluster.GetNodeId()
		if p := nodeIDProblem(id); p != "" {
			err = status.Errorf(codes.InvalidArgument, "node_in_cluster: invalid node_id %s: %s", quoteID(id), p)
		}
	case nil:
		err = status.Error(codes.Unimplemented, "watch request kind not set")
	default:
		err = status.Errorf(codes.Unimplemented, "watch request kind %T not supported", k)
	}
	if err != nil {
		s.badRequest(st.log, err)
		return err
	}
	sub, err := s.subscribe(ctx, st, id)
	if err != nil {
		return err
	}
	defer s.unsubscribe(sub)
	// The queue ends when the stream does: Next waits for the queue
	// alone, which costs less than waiting for it and ctx.
	stop := context.AfterFunc(ctx, func() { sub.q.Close(ctx.Err()) })
	defer stop()
	if id == "" {
		st.log.Info("stream opened", "kind", "nodes_in_cluster")
	} else {
		st.log.Info("stream opened", "kind", "node_in_cluster", "node", id)
	}
	defer func() { st.closed(err) }()

	if sub.backlog != nil {
		if err := s.sendBacklog(srv, st, sub.backlog); err != nil {
			return err
		}
		sub.backlog = nil
	}
	// known: the client has seen the node and not its deletion
	// (node_in_cluster only; a tombstone for a node the client never saw
	// would say nothing).
	known := false
	for first := id != ""; ; first = false {
		b, err := sub.q.Next(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return status.Error(codes.Unavailable, err.Error())
		}
		if b.Full() {
			if !first {
				// The wire has no way to say "this is everything now".
				return status.Error(codes.Internal, "curator server: a full state after the backlog")
			}
			if len(b.Changes) > 0 {
				if err := s.send(srv, st, b.Changes[0].Object.(*sharedEvent)); err != nil {
					return err
				}
				known = true
			}
			continue
		}
		slices.SortFunc(b.Changes, func(x, y flow.Change) int { return strings.Compare(x.ID, y.ID) })
		for _, c := range b.Changes {
			var ev any
			switch {
			case !c.Deleted:
				ev = c.Object.(*sharedEvent)
				known = true
			case id != "" && !known:
				continue
			default:
				ev = &apipb.WatchEvent{NodeTombstones: []*apipb.NodeTombstone{{NodeId: c.ID}}}
				known = false
			}
			if err := s.send(srv, st, ev); err != nil {
				return err
			}
		}
	}
}

// send sends ev (a *sharedEvent, or a *apipb.WatchEvent of its own) on a
// Watch stream, and counts it.
func (s *Server) send(srv apipb.Curator_WatchServer, st *stream, ev any) error {
	if err := srv.SendMsg(ev); err != nil {
		return err
	}
	var we *apipb.WatchEvent
	var size int
	switch ev := ev.(type) {
	case *sharedEvent:
		we, size = ev.WatchEvent, ev.data.Len()
	case *apipb.WatchEvent:
		we, size = ev, proto.Size(ev)
	}
	st.events++
	st.bytes += size
	s.m.sent(size)
	if st.debug {
		st.log.Debug("event sent", "nodes", countNodes(we), "tombstones", len(we.GetNodeTombstones()), "bytes", size)
	}
	return nil
}

// countNodes counts the nodes an event built by event() carries as its
// unknown fields (for the debug log).
func countNodes(ev *apipb.WatchEvent) int {
	n := 0
	for b := []byte(ev.ProtoReflect().GetUnknown()); len(b) > 0; {
		num, typ, l := protowire.ConsumeField(b)
		if l < 0 {
			break
		}
		if num == fieldNodes && typ == protowire.BytesType {
			n++
		}
		b = b[l:]
	}
	return n
}

// sendBacklog sends a nodes_in_cluster stream its backlog: bl's events.
func (s *Server) sendBacklog(srv apipb.Curator_WatchServer, st *stream, bl *backlog) error {
	limit := curator.MaxEventSize
	if s.eventLimit > 0 {
		limit = s.eventLimit
	}
	evs := bl.encoded(limit)
	unsent := len(bl.nodes)
	s.m.backlog(1, unsent)
	defer func() { s.m.backlog(-1, -unsent) }()
	for i, ev := range evs.events {
		if err := s.send(srv, st, ev); err != nil {
			return err
		}
		s.m.backlog(0, -evs.nodes[i])
		unsent -= evs.nodes[i]
	}
	return nil
}
