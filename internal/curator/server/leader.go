package server

import (
	"context"
	"net"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// GetCurrentLeader answers that this server is the leader, naming it by
// Config's NodeID, Host and Port, and keeps the stream open (as the
// Curator does, to announce changes) until the client's context ends or
// Run returns (codes.Unavailable).
func (s *Server) GetCurrentLeader(_ *apipb.GetCurrentLeaderRequest, srv apipb.CuratorLocal_GetCurrentLeaderServer) error {
	err := srv.Send(&apipb.GetCurrentLeaderResponse{
		LeaderNodeId: s.cfg.NodeID,
		LeaderHost:   advertisedHost(srv.Context(), s.cfg.Host),
		LeaderPort:   int32(s.cfg.Port),
		ThisNodeId:   s.cfg.NodeID,
	})
	if err != nil {
		return err
	}
	select {
	case <-srv.Context().Done():
		return status.FromContextError(srv.Context().Err()).Err()
	case <-s.done:
		return status.Error(codes.Unavailable, errStopped.Error())
	}
}

// advertisedHost is the leader_host to tell a client: the configured host,
// unless that is unspecified ("", 0.0.0.0, ::: serve listens on every
// interface), in which case the address the client reached this server at,
// which is one the client can reach.
func advertisedHost(ctx context.Context, host string) string {
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return host
	}
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		if h, _, err := net.SplitHostPort(p.LocalAddr.String()); err == nil {
			return h
		}
	}
	return host
}
