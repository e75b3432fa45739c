package server

import (
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
)

// healthServices are the services whose health s reports by name, besides
// the server as a whole (""): those that need a current view.
var healthServices = []string{apipb.Curator_ServiceDesc.ServiceName, mgmtpb.Management_ServiceDesc.ServiceName}

// setServing sets what the health service answers; s.mu must be held.
func (s *Server) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for _, svc := range healthServices {
		s.health.SetServingStatus(svc, st)
	}
	s.m.setCurrent(serving)
}

// setStale is the etcd watcher's OnCurrent(false): the view can no
// longer be called current, so every open stream ends with Unavailable
// (its client moves to another replica) and new ones are refused until a
// confirmation from etcd is applied (see apply).
func (s *Server) setStale(current bool) {
	if current {
		return // apply decides, once what etcd confirmed is applied
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.stale {
		return
	}
	s.stale = true
	s.setServing(false)
	n := len(s.subs)
	for sub := range s.subs {
		sub.q.Close(errStale)
		delete(s.subs, sub)
	}
	deadline := s.cfg.Keepalive.Deadline()
	s.log.Warn("etcd has not confirmed the view current: ending Watch streams with UNAVAILABLE and refusing Watch and GetNodes until it does",
		"for", deadline, "streams", n)
}

// refusal returns the status a new stream is refused with and the reason
// (a reason label of Metrics), or nil; s.mu must be held.
func (s *Server) refusal() (reason string, err error) {
	switch {
	case s.draining:
		return refusedStopping, status.Error(codes.Unavailable, errDraining.Error())
	case s.stopped:
		return refusedStopping, status.Error(codes.Unavailable, errStopped.Error())
	case s.stale:
		return refusedNotCurrent, status.Errorf(codes.Unavailable, "%v (last confirmed %v ago)", errStale, time.Since(s.confirmedAt).Round(time.Second))
	}
	return "", nil
}
