package server

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"

	"github.com/nodewatch/nodewatch/internal/dial"
)

// DefaultDrainTimeout is how long Serve gives open RPCs to end once it
// stops, when Config.DrainTimeout is 0: time for every client to be told
// (the status of a Watch stream reaches a client behind a full flow-control
// window only once it reads again), short beside a Kubernetes pod's
// default grace period of 30 seconds.
const DefaultDrainTimeout = 5 * time.Second

// Serve runs s and serves it over gRPC on l (with opts) until ctx ends or
// either fails. It blocks, and returns ctx.Err() when ctx ends, or the
// error s.Run or gRPC failed with. It closes l. It serves with
// ServerCodec, which sends the events every stream shares without a copy
// for each, and which opts must not replace: through it, a request that
// cannot be decoded is answered codes.InvalidArgument (see
// decodeRequests). It keeps at most Config.MaxConns connections open, and
// serves gRPC server reflection unless Config.NoReflection.
//
// When ctx ends, Serve drains:
//  1. the health service says NOT_SERVING, for good, and new streams are
//     refused (codes.Unavailable);
//  2. l is closed and every connection is sent an HTTP/2 GOAWAY, so that
//     clients open nothing more here;
//  3. every Watch and GetCurrentLeader stream ends with codes.Unavailable
//     ("shutting down; try another"), which moves clients that know other
//     replicas to them: a Watch never ends on its own;
//  4. open RPCs (GetNodes calls, statuses on their way) get
//     Config.DrainTimeout to end, and whatever is left is then closed.
func (s *Server) Serve(ctx context.Context, l net.Listener, opts ...grpc.ServerOption) error {
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	creds := insecure.NewCredentials()
	if s.cfg.TLS != nil {
		s.warnValidity()
		creds = credentials.NewTLS(s.cfg.TLS.Config())
	}
	opts = append(opts, grpc.Creds(headerCreds{creds, s.headerRefused}))
	opts = append([]grpc.ServerOption{ServerCodec()}, opts...)
	gs := grpc.NewServer(append(opts, grpc.ChainStreamInterceptor(s.decodeRequests))...)
	s.Register(gs)
	if !s.cfg.NoReflection {
		reflection.Register(gs)
	}
	// Connections past the limit are held back as long as bad requests.
	cl := newListener(l, s.cfg.MaxConns, s.badRequests.every, s.log, s.m)

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.reloads(runCtx) })
	errc := make(chan error, 2)
	wg.Go(func() { errc <- s.Run(runCtx) })
	wg.Go(func() {
		if err := gs.Serve(cl); err != nil {
			errc <- fmt.Errorf("serve: %w", err)
		}
	})

	var err error
	select {
	case <-ctx.Done():
		err = ctx.Err()
	case err = <-errc:
	}
	s.drain()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	// GracefulStop closes the listener before it sends GOAWAY: once it
	// is closed, a client that is told to go elsewhere cannot come back.
	select {
	case <-cl.closed:
	case <-stopped:
	}
	stopRun() // Run ends every Watch stream
	timeout := cmp.Or(s.cfg.DrainTimeout, DefaultDrainTimeout)
	begun := time.Now()
	select {
	case <-stopped:
		s.log.Info("drained", "took", time.Since(begun).Round(time.Millisecond))
	case <-time.After(timeout):
		s.log.Warn("drain timeout: closing the connections left", "drain_timeout", timeout)
		gs.Stop()
		<-stopped
	}
	return err
}

// drain marks s as shutting down: new streams are refused, and the health
// service says NOT_SERVING from now on.
func (s *Server) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.draining = true
	s.health.Shutdown()
	s.m.setCurrent(false)
	s.log.Info("draining: NOT_SERVING, refusing new streams, sending GOAWAY and ending Watch streams", "streams", len(s.subs))
}

// reloads reads the TLS files again on every request, until ctx ends.
func (s *Server) reloads(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Reloads:
			s.reloadTLS()
		}
	}
}

// reloadTLS reads the TLS files again, and logs what came of it.
func (s *Server) reloadTLS() {
	t := s.cfg.TLS
	if t == nil {
		s.log.Info("reload requested: serving plaintext, nothing to reload")
		return
	}
	leaf, err := t.Reload()
	if err != nil {
		s.log.Error("reload failed, keeping the certificate", append(certAttrs(t.Leaf()), "error", err)...)
		return
	}
	files := []any{"cert_file", t.Cert.Path, "key_file", t.Key.Path}
	if t.ClientCA.Path != "" {
		files = append(files, "client_ca_file", t.ClientCA.Path)
	}
	s.log.Info("reloaded certificate", append(files, certAttrs(leaf)...)...)
	s.warnValidity()
}

// warnValidity warns when clients would refuse the certificate served.
func (s *Server) warnValidity() {
	if p := dial.ValidityProblem(s.cfg.TLS.Leaf(), time.Now()); p != "" {
		s.log.Warn(fmt.Sprintf("%s: %s; clients will refuse it", s.cfg.TLS.Cert, p))
	}
}

// certAttrs name a certificate in a log line.
func certAttrs(c *x509.Certificate) []any {
	return []any{"subject", c.Subject.String(), "serial", c.SerialNumber.String(), "expires", c.NotAfter.UTC().Format(time.RFC3339)}
}
