// Package service runs `nodewatch serve` as a process: it starts the dev
// fleet when asked, connects to etcd, listens, and serves the Curator with
// a server.Server until its context ends. It stands above the server and
// the dev fleet, which know nothing of each other.
package service

import (
	"context"
	"fmt"
	"net"
	"strconv"

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
	// Limits bound the streams.
	Limits server.Limits
}

// Run connects to etcd (after starting the dev fleet), listens and
// serves until ctx ends, and says so through Config.Logf. It returns
// ctx.Err() when ctx ends, an error wrapping dial.ErrUnavailable when
// etcd cannot be reached within EtcdConfig's dial timeout, and what else
// keeps it from serving.
func Run(ctx context.Context, p Process) error {
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ec := p.EtcdConfig
	if p.Dev != nil {
		fleet, err := devfleet.Start(ctx, *p.Dev)
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer fleet.Close()
		ec = etcdkv.Config{Endpoints: []string{fleet.Endpoint}, Keepalive: ec.Keepalive, DialTimeout: ec.DialTimeout}
	}
	ec.Conns = dial.NewConns()
	client, err := etcdkv.Connect(ctx, ec, p.Prefix, true)
	if err != nil {
		return err
	}
	defer client.Close()

	l, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	cfg := p.Config
	cfg.Etcd, cfg.EtcdConns, cfg.Keepalive, cfg.Host, cfg.Port = client, ec.Conns, ec.Keepalive, host, port
	srv := server.New(cfg)
	logf("serving Curator Watch on %s (records under %q in etcd %v)", l.Addr(), p.Prefix, ec.Endpoints)
	if d := p.Dev; d != nil {
		logf("dev: embedded etcd at %s with %d simulated nodes changing at %g/s. Try:", ec.Endpoints[0], d.Nodes, d.Rate)
		logf("dev:   nodewatch nodes --curator %s", l.Addr())
		logf("dev:   nodewatch key --prefix %s --etcd %s", p.Prefix, ec.Endpoints[0])
	}
	err = srv.Serve(ctx, l, p.Limits.ServerOptions()...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
