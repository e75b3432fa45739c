package server

import (
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// startServer runs a Server for cfg until the test ends.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s := New(cfg)
	curatortest.Start(t, s)
	return s
}

// serveStore serves st's records over gRPC on loopback.
func serveStore(t *testing.T, st *curatortest.Store, lg *curatortest.Logs) (*Server, *curatortest.GRPCServer) {
	t.Helper()
	s := startServer(t, Config{Etcd: st.Etcd, Prefix: st.Prefix, Log: lg.Logger(), MaxBackoff: 200 * time.Millisecond})
	return s, curatortest.ServeGRPC(t, "", s)
}
