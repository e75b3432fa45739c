// Package serviceflags is the command line of `nodewatch serve`: its flag
// table (how to reach etcd, where and how to listen, the limits, the log,
// the dev fleet) and its parsing into the service.Process it runs,
// checked before anything listens or connects. It keeps the table next
// to the package it configures, out of the command. Every error of
// parsing is a usage error (cmdline.Usagef) that names the flag.
package serviceflags

import (
	"io"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/connflags"
	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/devfleet"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/service"
)

// Flags are serve's flags: connflags.Etcd, then serve's own.
func Flags() []cli.Flag {
	return append(connflags.Etcd(),
		&cli.StringFlag{Name: "listen", Value: connflags.DefaultCurator(), Usage: "serve on `HOST:PORT`"},
		&cli.StringFlag{Name: "prefix", Value: curator.DefaultPrefix, Usage: "node records live under `PREFIX`"},
		&cli.StringFlag{Name: "node-id", Value: "nodewatch-serve", Usage: "this server's `ID` in GetCurrentLeader"},
		&cli.BoolFlag{Name: "insecure", Usage: "allow plaintext on a non-loopback address"},
		&cli.StringFlag{Name: "listen-cert", Usage: "serve TLS with the certificate in `FILE`", TakesFile: true},
		&cli.StringFlag{Name: "listen-key", Usage: "serve TLS with the key in `FILE`", TakesFile: true},
		&cli.StringFlag{Name: "listen-cacert", Usage: "require client certificates signed by the CA in `FILE` (mTLS)", TakesFile: true},
		&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second, Usage: "exit 3 when etcd cannot be reached within `D`"},
		&cli.IntFlag{Name: "max-streams", Value: server.DefaultMaxStreams, Usage: "serve at most `N` streams at once over all connections"},
		&cli.IntFlag{Name: "max-streams-per-conn", Value: server.DefaultMaxStreamsPerConn, Usage: "let one connection open at most `N` streams at once"},
		&cli.IntFlag{Name: "max-connections", Value: server.DefaultMaxConns, Usage: "keep at most `N` client connections open; close new ones past it"},
		&cli.DurationFlag{Name: "idle-timeout", Value: server.DefaultIdleTimeout, Usage: "close a connection that has had no stream open for `D`"},
		&cli.BoolFlag{Name: "reflection", Value: true, Usage: "serve gRPC server reflection (--reflection=false: off)"},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://`HOST:PORT`/metrics", DefaultText: "off"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log as `FORMAT`: text (key=value) or json (one object per line)"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log at `LEVEL` and above: debug (every event sent, every connection closed), info (streams), warn, error"},
		&cli.DurationFlag{Name: "drain-timeout", Value: server.DefaultDrainTimeout, Usage: "on SIGTERM or SIGINT, give open streams `D` to end before closing them"},
		&cli.BoolFlag{Name: "dev", Usage: "run etcd (nodewatch-etcd, a child process) with a simulated fleet on it"},
		&cli.IntFlag{Name: "dev-nodes", Value: 5, Usage: "with --dev: simulate `N` nodes"},
		&cli.Float64Flag{Name: "dev-rate", Value: 2, Usage: "with --dev: `R` simulated changes per second"},
		&cli.BoolFlag{Name: "dev-churn", Usage: "with --dev: nodes also join, are decommissioned and leave (otherwise the fleet stays at --dev-nodes, all UP)"},
		&cli.StringFlag{Name: "data-dir", Usage: "with --dev: keep etcd's data in `DIR`", DefaultText: "a temporary directory"},
	)
}

// Options are the parsed Flags: the process to run, and how it logs.
type Options struct {
	service.Process
	// LogFormat is --log-format: "text" or "json" (Logger).
	LogFormat string
	// LogLevel is --log-level: the least level logged (Logger).
	LogLevel slog.Level
}

// Parse reads Flags from c; e is what parsing the etcd flags may touch
// (connflags.ParseEtcd). The process has no Log, Reloads, nor the dev
// fleet's Seed and Logf: the command sets them when it runs.
func Parse(c *cli.Context, e connflags.Env) (*Options, error) {
	o := &Options{LogFormat: c.String("log-format")}
	o.Listen, o.Prefix, o.NodeID = c.String("listen"), c.String("prefix"), c.String("node-id")
	o.MetricsAddr, o.DrainTimeout = c.String("metrics-addr"), c.Duration("drain-timeout")
	dev := &devfleet.Config{Dir: c.String("data-dir"), Nodes: c.Int("dev-nodes"), Rate: c.Float64("dev-rate"), Prefix: o.Prefix, Churn: c.Bool("dev-churn")}
	dialTimeout, maxStreams, perConn := c.Duration("dial-timeout"), c.Int("max-streams"), c.Int("max-streams-per-conn")
	o.MaxConns, o.NoReflection = c.Int("max-connections"), !c.Bool("reflection")
	idle := c.Duration("idle-timeout")
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, cmdline.Usagef("--listen: %v", err)
	}
	switch {
	case o.Prefix == "":
		return nil, cmdline.Usagef("--prefix: must not be empty")
	case dev.Nodes < 1:
		return nil, cmdline.Usagef("--dev-nodes: must be at least 1, got %d", dev.Nodes)
	case !(dev.Rate >= 0):
		return nil, cmdline.Usagef("--dev-rate: must be >= 0, got %v", dev.Rate)
	case dialTimeout <= 0:
		return nil, cmdline.Usagef("--dial-timeout: must be positive")
	case maxStreams < 1:
		return nil, cmdline.Usagef("--max-streams: must be at least 1, got %d", maxStreams)
	case perConn < 1 || uint64(perConn) > math.MaxUint32:
		return nil, cmdline.Usagef("--max-streams-per-conn: must be between 1 and %d, got %d", uint32(math.MaxUint32), perConn)
	case o.MaxConns < 1:
		return nil, cmdline.Usagef("--max-connections: must be at least 1, got %d", o.MaxConns)
	case idle <= 0:
		return nil, cmdline.Usagef("--idle-timeout: must be positive")
	case o.DrainTimeout <= 0:
		return nil, cmdline.Usagef("--drain-timeout: must be positive")
	case o.LogFormat != "text" && o.LogFormat != "json":
		return nil, cmdline.Usagef("--log-format: must be text or json, got %q", o.LogFormat)
	}
	if err := o.LogLevel.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, cmdline.Usagef("--log-level: must be debug, info, warn or error, got %q", c.String("log-level"))
	}
	if o.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			return nil, cmdline.Usagef("--metrics-addr: %v", err)
		}
	}
	o.Limits = server.Limits{MaxStreams: maxStreams, MaxStreamsPerConn: uint32(perConn), IdleTimeout: idle}
	if c.Bool("dev") {
		o.Dev = dev
	}
	if o.TLS, err = parseTLS(c); err != nil {
		return nil, err
	}
	if o.TLS == nil && !c.Bool("insecure") && !dial.IsLoopback(host) {
		return nil, cmdline.Usagef("--listen %s: refusing plaintext on a non-loopback address (give --listen-cert/--listen-key, or --insecure)", o.Listen)
	}
	if o.EtcdConfig, err = connflags.ParseEtcd(c, e); err != nil {
		return nil, err
	}
	o.EtcdConfig.DialTimeout = dialTimeout
	return o, nil
}

// parseTLS reads the files of --listen-cert, --listen-key and
// --listen-cacert; nil for plaintext.
func parseTLS(c *cli.Context) (*dial.ServerTLS, error) {
	cert, key, ca := c.String("listen-cert"), c.String("listen-key"), c.String("listen-cacert")
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, cmdline.Usagef("--listen-cert and --listen-key go together")
	}
	t, err := dial.LoadServerTLS(dial.File{Flag: "--listen-cert", Path: cert}, dial.File{Flag: "--listen-key", Path: key}, dial.File{Flag: "--listen-cacert", Path: ca})
	if err != nil {
		return nil, cmdline.Usage(err)
	}
	return t, nil
}

// Logger is serve's logger as --log-format and --log-level ask: slog's
// text (key=value) or JSON lines on w.
func (o *Options) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: o.LogLevel}
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
