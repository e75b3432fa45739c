package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itchyny/gojq"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/nodeset"
)

// keyOptions are the flags of `nodewatch key`.
type keyOptions struct {
	*watchOptions
	etcd   etcdOptions
	key    string
	prefix bool
	value  etcdkv.ValueMode
}

func keyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "key",
		Usage:     "watch one etcd key, or every key under a prefix",
		ArgsUsage: "KEY",
		Description: `Lists KEY (with --prefix: every key under it) at one revision, then watches
from the next revision. After a compaction or a lost connection it lists
again and prints only what differs.

Examples:
   nodewatch key /config/feature-x
   nodewatch key --prefix /nodes/ --filter '.value.state == "NODE_STATE_UP"'
   nodewatch key --prefix /jobs/ --until 'length == 0' --timeout 10m`,
		Flags: append(append(etcdFlags(),
			&cli.BoolFlag{Name: "prefix", Usage: "watch every key that starts with KEY"},
			&cli.StringFlag{Name: "value", Value: "auto", Usage: "how values are decoded, `MODE`: auto, json, text or base64"},
		), watchFlags()...),
		Action: func(c *cli.Context) error {
			o, err := parseKeyOptions(c)
			if err != nil {
				return err
			}
			return runKey(c.Context, e, o)
		},
	}
}

func parseKeyOptions(c *cli.Context) (*keyOptions, error) {
	if c.NArg() != 1 {
		return nil, usagef("key: want exactly one KEY, got %d arguments", c.NArg())
	}
	if c.Args().First() == "" && !c.Bool("prefix") {
		return nil, usagef(`key: KEY must not be empty (to watch every key: --prefix "")`)
	}
	w, err := parseWatchOptions(c, ".value")
	if err != nil {
		return nil, err
	}
	mode, err := etcdkv.ParseValueMode(c.String("value"))
	if err != nil {
		return nil, usagef("--value: %v", err)
	}
	eo, err := parseEtcdOptions(c)
	if err != nil {
		return nil, err
	}
	o := &keyOptions{watchOptions: w, etcd: eo, key: c.Args().First(), prefix: c.Bool("prefix"), value: mode}
	o.list = o.prefix
	o.target = "etcd at " + strings.Join(eo.endpoints, ",")
	o.summary = func(obj any) string {
		// -o text shows the value; the revisions are noise to a human.
		m, _ := obj.(map[string]any)
		b, _ := gojq.Marshal(m["value"])
		return string(b)
	}
	return o, nil
}

func runKey(ctx context.Context, e *env, o *keyOptions) error {
	dial := o.dialTimeout
	if o.timeout > 0 {
		dial = min(dial, o.timeout) // --timeout bounds the whole run
	}
	started := time.Now()
	client, err := o.etcd.connect(ctx, dial, o.key, o.prefix)
	if err != nil {
		return err
	}
	defer client.Close()
	if o.timeout > 0 {
		// What connecting took counts against --timeout.
		o.timeout = max(o.timeout-time.Since(started), time.Millisecond)
	}
	w := &etcdkv.Watcher{
		Client: client,
		Key:    o.key,
		Prefix: o.prefix,
		Decode: func(kv *mvccpb.KeyValue) (any, error) { return etcdkv.Object(kv, o.value) },
		Logf:   e.logf,
	}
	return follow(ctx, e, o.watchOptions, func(ctx context.Context, out nodeset.Sink) error {
		return w.Run(ctx, out)
	})
}

// etcdFlags are the connection flags for etcd.
func etcdFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "etcd", Value: "127.0.0.1:2379", EnvVars: []string{"NODEWATCH_ETCD"}, Usage: "etcd endpoints, comma-separated `URL[,URL…]`"},
		&cli.StringFlag{Name: "user", EnvVars: []string{"NODEWATCH_USER"}, Usage: "etcd user `NAME[:PASSWORD]` (password also from NODEWATCH_PASSWORD)"},
	}, tlsFlags()...)
}

// etcdOptions say how to reach etcd.
type etcdOptions struct {
	endpoints      []string
	user, password string
	tls            *tls.Config
}

func parseEtcdOptions(c *cli.Context) (etcdOptions, error) {
	o := etcdOptions{endpoints: splitList(c.String("etcd"))}
	if len(o.endpoints) == 0 {
		return o, usagef("--etcd: no endpoint given")
	}
	if u := c.String("user"); u != "" {
		o.user, o.password, _ = strings.Cut(u, ":")
		if o.password == "" {
			o.password = os.Getenv("NODEWATCH_PASSWORD")
		}
	}
	t, err := tlsConfig(c)
	if err != nil {
		return o, err
	}
	o.tls = t
	return o, nil
}

// tlsConfig builds the client TLS configuration from --cacert, --cert,
// --key and --tls-server-name; nil when none is given.
func tlsConfig(c *cli.Context) (*tls.Config, error) {
	ca, cert, key, name := c.String("cacert"), c.String("cert"), c.String("key"), c.String("tls-server-name")
	if ca == "" && cert == "" && key == "" && name == "" {
		return nil, nil
	}
	t := &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usagef("--cacert: %v", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("--cacert: no PEM certificate in %s", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, usagef("--cert and --key go together")
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, usagef("--cert/--key: %v", err)
		}
		t.Certificates = []tls.Certificate{kp}
	}
	return t, nil
}

// connect opens an etcd client and proves the connection within
// dialTimeout by counting the keys it is about to use (key, or every key
// under it with prefix): a user whose role covers only that range passes.
// No answer in time is an unavailableError naming the endpoints; a refusal
// (credentials, permissions) is a plain error.
func (o etcdOptions) connect(ctx context.Context, dialTimeout time.Duration, key string, prefix bool) (*clientv3.Client, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   o.endpoints,
		DialTimeout: dialTimeout,
		Username:    o.user,
		Password:    o.password,
		TLS:         o.tls,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, connectError(o.endpoints, dialTimeout, err)
	}
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	probe := []clientv3.OpOption{clientv3.WithCountOnly()}
	if prefix {
		probe = append(probe, clientv3.WithPrefix())
	}
	if _, err := client.Get(pctx, key, probe...); err != nil {
		client.Close()
		if ctx.Err() != nil {
			return nil, errInterrupted
		}
		return nil, connectError(o.endpoints, dialTimeout, err)
	}
	return client, nil
}

// connectError classifies a failure to connect: nobody answering in time
// is "unavailable" (exit 3); a server that answers and refuses (bad
// credentials, permissions) is a runtime failure (exit 1).
func connectError(endpoints []string, dialTimeout time.Duration, err error) error {
	eps := strings.Join(endpoints, ",")
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
		return &unavailableError{fmt.Errorf("no etcd reachable at %s within %v (last error: %v)", eps, dialTimeout, err)}
	}
	return fmt.Errorf("etcd at %s: %w", eps, err)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
