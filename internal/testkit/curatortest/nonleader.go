package curatortest

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// NonLeader answers as a Metropolis node that is not the Curator leader
// does: Watch is codes.Unimplemented, and CuratorLocal.GetCurrentLeader
// names the leader. Tests use it to check that clients follow it to the
// leader.
//
// Its methods are called by gRPC and are safe for concurrent use; the
// fields must not change while it serves.
type NonLeader struct {
	apipb.UnimplementedCuratorServer
	apipb.UnimplementedCuratorLocalServer

	// NodeID names this node (this_node_id).
	NodeID string
	// LeaderNodeID, LeaderHost and LeaderPort name the leader.
	LeaderNodeID string
	LeaderHost   string
	LeaderPort   int
}

var (
	_ apipb.CuratorServer      = (*NonLeader)(nil)
	_ apipb.CuratorLocalServer = (*NonLeader)(nil)
)

// Register registers n as the Curator and CuratorLocal service on r.
func (n *NonLeader) Register(r grpc.ServiceRegistrar) {
	apipb.RegisterCuratorServer(r, n)
	apipb.RegisterCuratorLocalServer(r, n)
}

// Watch refuses every request with codes.Unimplemented.
func (n *NonLeader) Watch(*apipb.WatchRequest, apipb.Curator_WatchServer) error {
	return status.Error(codes.Unimplemented, "this node is not the curator leader")
}

// GetCurrentLeader sends one response naming the leader, then keeps the
// stream open until the client's context ends.
func (n *NonLeader) GetCurrentLeader(_ *apipb.GetCurrentLeaderRequest, srv apipb.CuratorLocal_GetCurrentLeaderServer) error {
	err := srv.Send(&apipb.GetCurrentLeaderResponse{
		LeaderNodeId: n.LeaderNodeID,
		LeaderHost:   n.LeaderHost,
		LeaderPort:   int32(n.LeaderPort),
		ThisNodeId:   n.NodeID,
	})
	if err != nil {
		return err
	}
	<-srv.Context().Done()
	return status.FromContextError(srv.Context().Err()).Err()
}
