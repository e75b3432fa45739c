package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/devfleet"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// serveOptions are the flags of `nodewatch serve`.
type serveOptions struct {
	listen      string
	etcd        etcdkv.Config
	prefix      string
	nodeID      string
	insecure    bool
	tls         *dial.ServerTLS // nil: plaintext
	dialTimeout time.Duration
	limits      server.Limits

	dev      bool
	devNodes int
	devRate  float64
	dataDir  string
}

func serveCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the Curator Watch API over node records kept in etcd",
		Description: `Serves metropolis.node.core.curator.proto.api.Curator/Watch and
CuratorLocal/GetCurrentLeader over the node records under --prefix in etcd
(key PREFIX+ID, value the Node as protobuf JSON or binary protobuf). One etcd
watch feeds every client stream; several serve replicas can run side by side.
A record that cannot be decoded is reported on stderr and skipped.

With --dev, serve starts its own etcd (in-process, loopback, data in a
temporary directory unless --data-dir) and a simulated fleet of --dev-nodes
nodes on it, so everything runs on one machine with nothing installed.

Plaintext is refused on a non-loopback --listen address unless --insecure or
--listen-cert/--listen-key are given. On SIGHUP, serve reads --listen-cert,
--listen-key and --listen-cacert again: new connections get the new
certificate, open streams go on. If the files are unusable, serve logs why
and keeps the certificate it has.

A client may open --max-streams-per-conn streams on one connection (gRPC
clients queue the next one until one ends) and all clients together
--max-streams (past it a call fails at once with RESOURCE_EXHAUSTED).
Requests larger than 16 KiB are refused; a client that pings more often than
once a second is disconnected (GOAWAY too_many_pings), as by the Curator.

Examples:
   nodewatch serve --dev
   nodewatch serve --etcd https://etcd-0:2379,https://etcd-1:2379 --cacert ca.pem --listen 0.0.0.0:7835 --listen-cert srv.pem --listen-key srv.key`,
		Flags: append(etcdFlags(),
			&cli.StringFlag{Name: "listen", Value: defaultCurator(), Usage: "serve on `HOST:PORT`"},
			&cli.StringFlag{Name: "prefix", Value: curator.DefaultPrefix, Usage: "node records live under `PREFIX`"},
			&cli.StringFlag{Name: "node-id", Value: "nodewatch-serve", Usage: "this server's `ID` in GetCurrentLeader"},
			&cli.BoolFlag{Name: "insecure", Usage: "allow plaintext on a non-loopback address"},
			&cli.StringFlag{Name: "listen-cert", Usage: "serve TLS with the certificate in `FILE`", TakesFile: true},
			&cli.StringFlag{Name: "listen-key", Usage: "serve TLS with the key in `FILE`", TakesFile: true},
			&cli.StringFlag{Name: "listen-cacert", Usage: "require client certificates signed by the CA in `FILE` (mTLS)", TakesFile: true},
			&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second, Usage: "exit 3 when etcd cannot be reached within `D`"},
			&cli.IntFlag{Name: "max-streams", Value: server.DefaultMaxStreams, Usage: "serve at most `N` streams at once over all connections"},
			&cli.IntFlag{Name: "max-streams-per-conn", Value: server.DefaultMaxStreamsPerConn, Usage: "let one connection open at most `N` streams at once"},
			&cli.BoolFlag{Name: "dev", Usage: "run an embedded etcd with a simulated fleet"},
			&cli.IntFlag{Name: "dev-nodes", Value: 5, Usage: "with --dev: simulate `N` nodes"},
			&cli.Float64Flag{Name: "dev-rate", Value: 2, Usage: "with --dev: `R` simulated changes per second"},
			&cli.StringFlag{Name: "data-dir", Usage: "with --dev: keep etcd's data in `DIR` (default: a temporary directory)"},
		),
		Action: func(c *cli.Context) error {
			o, err := parseServeOptions(c, e)
			if err != nil {
				return err
			}
			return runServe(c.Context, e, o)
		},
	}
}

func parseServeOptions(c *cli.Context, e *env) (*serveOptions, error) {
	if c.NArg() > 0 {
		return nil, usagef("serve: takes no arguments, got %q", c.Args().First())
	}
	o := &serveOptions{
		listen:      c.String("listen"),
		prefix:      c.String("prefix"),
		nodeID:      c.String("node-id"),
		insecure:    c.Bool("insecure"),
		dialTimeout: c.Duration("dial-timeout"),
		dev:         c.Bool("dev"),
		devNodes:    c.Int("dev-nodes"),
		devRate:     c.Float64("dev-rate"),
		dataDir:     c.String("data-dir"),
	}
	maxStreams, perConn := c.Int("max-streams"), c.Int("max-streams-per-conn")
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return nil, usagef("--listen: %v", err)
	}
	switch {
	case o.prefix == "":
		return nil, usagef("--prefix: must not be empty")
	case o.devNodes < 1:
		return nil, usagef("--dev-nodes: must be at least 1, got %d", o.devNodes)
	case !(o.devRate >= 0):
		return nil, usagef("--dev-rate: must be >= 0, got %v", o.devRate)
	case o.dialTimeout <= 0:
		return nil, usagef("--dial-timeout: must be positive")
	case maxStreams < 1:
		return nil, usagef("--max-streams: must be at least 1, got %d", maxStreams)
	case perConn < 1 || uint64(perConn) > math.MaxUint32:
		return nil, usagef("--max-streams-per-conn: must be between 1 and %d, got %d", uint32(math.MaxUint32), perConn)
	}
	o.limits = server.Limits{MaxStreams: maxStreams, MaxStreamsPerConn: uint32(perConn)}
	if o.tls, err = serverTLSFlags(c); err != nil {
		return nil, err
	}
	if o.tls == nil && !o.insecure && !dial.IsLoopback(host) {
		return nil, usagef("--listen %s: refusing plaintext on a non-loopback address (give --listen-cert/--listen-key, or --insecure)", o.listen)
	}
	if o.etcd, err = parseEtcdOptions(c, e); err != nil {
		return nil, err
	}
	return o, nil
}

// serverTLSFlags reads the files of --listen-cert, --listen-key and
// --listen-cacert; nil for plaintext.
func serverTLSFlags(c *cli.Context) (*dial.ServerTLS, error) {
	cert, key, ca := c.String("listen-cert"), c.String("listen-key"), c.String("listen-cacert")
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, usagef("--listen-cert and --listen-key go together")
	}
	t, err := dial.LoadServerTLS(dial.File{Flag: "--listen-cert", Path: cert}, dial.File{Flag: "--listen-key", Path: key}, dial.File{Flag: "--listen-cacert", Path: ca})
	if err != nil {
		return nil, usage(err)
	}
	return t, nil
}

func runServe(ctx context.Context, e *env, o *serveOptions) error {
	// Subscribed before serve says it serves: from then on SIGHUP
	// reloads, it does not end the process.
	var reloads <-chan os.Signal
	if e.reloads != nil {
		c, stop := e.reloads()
		defer stop()
		reloads = c
	}
	if o.dev {
		fleet, err := devfleet.Start(ctx, devfleet.Config{
			Dir: o.dataDir, Nodes: o.devNodes, Rate: o.devRate, Seed: time.Now().UnixNano(), Prefix: o.prefix, Logf: e.logf,
		})
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer fleet.Close()
		o.etcd = etcdkv.Config{Endpoints: []string{fleet.Endpoint}, Keepalive: o.etcd.Keepalive}
	}
	o.etcd.DialTimeout = o.dialTimeout
	o.etcd.Conns = dial.NewConns()
	client, err := etcdkv.Connect(ctx, o.etcd, o.prefix, true)
	if err != nil {
		return err
	}
	defer client.Close()

	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	srv := server.New(server.Config{
		Etcd: client, EtcdConns: o.etcd.Conns, Keepalive: o.etcd.Keepalive,
		Prefix: o.prefix, NodeID: o.nodeID, Host: host, Port: port, Logf: e.logf,
		TLS: o.tls, Reloads: reloads,
	})
	e.logf("serving Curator Watch on %s (records under %q in etcd %v)", l.Addr(), o.prefix, o.etcd.Endpoints)
	if o.dev {
		e.logf("dev: embedded etcd at %s with %d simulated nodes changing at %g/s. Try:", o.etcd.Endpoints[0], o.devNodes, o.devRate)
		e.logf("dev:   nodewatch nodes --curator %s", l.Addr())
		e.logf("dev:   nodewatch key --prefix %s --etcd %s", o.prefix, o.etcd.Endpoints[0])
	}
	err = srv.Serve(ctx, l, o.limits.ServerOptions()...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
