package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
)

// GetNodes answers Management.GetNodes: one Node per current node, in id
// order, then the end of the stream. Each carries the node's id, state,
// status, roles and labels as Watch sends them, and the health its record
// holds (curator.DecodeHealth): HEALTH_UNKNOWN when the record says
// nothing, and time_since_heartbeat, measured now, when it names a
// heartbeat.
//
// Errors: codes.Unimplemented for a filter (the Curator's CEL
// expressions are not evaluated here), codes.Unavailable once Run has
// returned or while the view is not current (see Server.Register); the stream's own context ending returns its status. Like
// Watch, GetNodes waits for Run to have read the initial state.
func (s *Server) GetNodes(req *mgmtpb.GetNodesRequest, srv grpc.ServerStreamingServer[mgmtpb.Node]) (err error) {
	s.m.getNodes()
	st := s.openStream(srv.Context(), "GetNodes")
	if req.GetFilter() != "" {
		err := status.Error(codes.Unimplemented, "GetNodes: filter expressions are not supported by nodewatch serve; send no filter to get every node")
		s.badRequest(st.log, err)
		return err
	}
	if err := s.waitReady(srv.Context()); err != nil {
		return err
	}
	s.mu.Lock()
	if reason, err := s.refusal(); err != nil {
		s.mu.Unlock()
		st.refused(s.m, reason, err)
		return err
	}
	recs := make([]*record, 0, s.nodes.Set().Len())
	s.nodes.Set().Ascend(func(_ string, obj any) bool {
		recs = append(recs, obj.(*record))
		return true
	})
	s.mu.Unlock()
	st.log.Info("stream opened", "nodes", len(recs))
	defer func() { st.closed(err) }()

	now := time.Now()
	for _, rec := range recs {
		n := &apipb.Node{}
		if err := proto.Unmarshal(rec.wire, n); err != nil {
			return status.Errorf(codes.Internal, "GetNodes: decode a kept node: %v", err)
		}
		m := &mgmtpb.Node{
			Id:     n.GetId(),
			State:  n.GetState(),
			Status: n.GetStatus(),
			Roles:  n.GetRoles(),
			Labels: n.GetLabels(),
			Health: rec.health.Health,
		}
		if m.Health == mgmtpb.Node_HEALTH_INVALID {
			m.Health = mgmtpb.Node_HEALTH_UNKNOWN
		}
		if hb := rec.health.Heartbeat; !hb.IsZero() {
			m.TimeSinceHeartbeat = durationpb.New(max(now.Sub(hb), 0))
		}
		if err := srv.Send(m); err != nil {
			return err
		}
		st.events++
	}
	return nil
}
