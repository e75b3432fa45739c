// Package service runs `nodewatch serve` as a process: it starts the dev
// fleet when asked, connects to etcd, listens, and serves the Curator with
// a server.Server until its context ends. It stands above the server and
// the dev fleet, which know nothing of each other.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/devfleet"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// Process is `nodewatch serve` as a process runs it: where etcd is (or a
// dev fleet to start), where to listen, and the Config of the Server, whose
// Etcd, EtcdConns, Host and Port Run fills in.
type Process struct {
	server.Config
	// EtcdConfig says how to reach etcd; with Dev, only its Keepalive
	// and DialTimeout count.
	EtcdConfig etcdkv.Config
	// Dev, if set, starts an embedded etcd with a simulated fleet on it
	// (serve --dev), and serves from it.
	Dev *devfleet.Config
	// Listen is the address to serve on (HOST:PORT).
	Listen string
	// Limits bound the streams and how long a connection may stay idle;
	// Config.MaxConns bounds the connections.
	Limits server.Limits
	// MetricsAddr, if set, is the address (HOST:PORT) to serve Prometheus
	// metrics on, at /metrics: the Server's (Config.Metrics, which Run
	// sets), the Go runtime's and the process's.
	MetricsAddr string
}

// Run connects to etcd (after starting the dev fleet), listens and
// serves until ctx ends, and says so through Config.Log. It returns
// ctx.Err() when ctx ends, an error wrapping dial.ErrUnavailable when
// etcd cannot be reached within EtcdConfig's dial timeout, and what else
// keeps it from serving.
func Run(ctx context.Context, p Process) error {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ec := p.EtcdConfig
	parent := ctx
	if p.Dev != nil {
		fleet, err := devfleet.Start(ctx, *p.Dev)
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer fleet.Close()
		ec = etcdkv.Config{Endpoints: []string{fleet.Endpoint}, Keepalive: ec.Keepalive, DialTimeout: ec.DialTimeout}
		// An etcd that exits under serve ends it: there is no other to
		// follow.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-fleet.Lost():
				cancel(fleet.LostErr())
			case <-ctx.Done():
			}
		}()
	}
	ec.Conns = dial.NewConns()
	client, err := etcdkv.Connect(ctx, ec, p.Prefix, true)
	if err != nil {
		return err
	}
	defer client.Close()

	cfg := p.Config
	if p.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Metrics = server.NewMetrics(reg)
		stop, err := serveMetrics(p.MetricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	l, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	cfg.Etcd, cfg.EtcdConns, cfg.Keepalive, cfg.Host, cfg.Port = client, ec.Conns, ec.Keepalive, host, port
	srv := server.New(cfg)
	log.Info(fmt.Sprintf("serving Curator Watch on %s", l.Addr()), "prefix", p.Prefix, "etcd", ec.Endpoints)
	for _, w := range exposure(p) {
		log.Warn(w)
	}
	if d := p.Dev; d != nil {
		log.Info(fmt.Sprintf("dev: embedded etcd at %s with %d simulated nodes changing at %g/s. Try:", ec.Endpoints[0], d.Nodes, d.Rate))
		log.Info(fmt.Sprintf("dev:   nodewatch nodes --curator %s", l.Addr()))
		log.Info(fmt.Sprintf("dev:   nodewatch key --prefix %s --etcd %s", p.Prefix, ec.Endpoints[0]))
	}
	err = srv.Serve(ctx, l, p.Limits.ServerOptions(cfg.Metrics)...)
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case ctx.Err() != nil:
		return fmt.Errorf("dev: %w", context.Cause(ctx))
	}
	return err
}

// exposure says what p serves beyond loopback to whoever reaches it, one
// warning each, for Run to log once it listens: metrics (plain HTTP,
// without authentication), and the Curator without client certificates
// (TLS without a client CA, or plaintext), through which every node's
// state, addresses and roles are anyone's who can reach the address:
// fine behind a firewall or a NetworkPolicy, a leak otherwise.
func exposure(p Process) []string {
	var ws []string
	if p.MetricsAddr != "" && !loopback(p.MetricsAddr) {
		ws = append(ws, fmt.Sprintf("--metrics-addr %s: metrics are served beyond loopback, in plain HTTP and without authentication, "+
			"to whoever reaches the address; keep it behind a firewall, or on 127.0.0.1", p.MetricsAddr))
	}
	if !loopback(p.Listen) {
		switch {
		case p.TLS == nil:
			ws = append(ws, fmt.Sprintf("--listen %s: plaintext beyond loopback (--insecure): whoever reaches the address can watch every node, "+
				"and whoever is on the path can read and change what clients are sent", p.Listen))
		case p.TLS.ClientCA.Path == "":
			ws = append(ws, fmt.Sprintf("--listen %s: TLS without client certificates (no --listen-cacert) beyond loopback: "+
				"whoever reaches the address can watch every node", p.Listen))
		}
	}
	return ws
}

// loopback says whether addr (HOST:PORT) is on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && dial.IsLoopback(host)
}

// serveMetrics serves what reg gathers at http://addr/metrics (nothing
// else: every other path is 404) until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info(fmt.Sprintf("serving metrics on http://%s/metrics", l.Addr()))
	return func() {
		hs.Close()
		<-done
	}, nil
}
