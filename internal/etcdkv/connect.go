package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// ErrUnavailable is wrapped by the error Connect returns when no etcd
// endpoint answered within the dial timeout. It wraps dial.ErrUnavailable.
var ErrUnavailable = fmt.Errorf("etcd %w", dial.ErrUnavailable)

// Config says how to reach etcd; dial, which opens every connection, has
// it.
type Config = dial.EtcdConfig

// Connect opens an etcd client (dial.Etcd) and proves the connection
// within the dial timeout by counting the keys it is about to use (key,
// or every key under it with prefix), so that a user whose role covers
// only that range passes. The caller closes the client.
//
// No answer in time is an error wrapping ErrUnavailable, naming the
// endpoints and the last error (explained, see dial.Credentials); a
// refusal (bad credentials, permission denied: see refused) is a plain
// error; ctx ending returns ctx.Err().
//
// With cfg.Outage set, Connect begins it (dial.Outage.Begin), so that an
// etcd not reached within dial.Announce is said to be unreachable then,
// with why, and ends its start once etcd answered.
func Connect(ctx context.Context, cfg Config, key string, prefix bool) (*clientv3.Client, error) {
	if cfg.Outage != nil {
		cfg.Outage.Begin()
	}
	client, err := dial.Etcd(ctx, cfg)
	if err != nil {
		return nil, connectError(ctx, cfg, err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout())
	defer cancel()
	probe := []clientv3.OpOption{clientv3.WithCountOnly()}
	if prefix {
		probe = append(probe, clientv3.WithPrefix())
		if key == "" {
			key = "\x00" // every key; etcd refuses an empty one
		}
	}
	if _, err := client.Get(pctx, key, probe...); err != nil {
		client.Close()
		return nil, connectError(ctx, cfg, client.Explain(err))
	}
	if cfg.Outage != nil {
		cfg.Outage.Up(strings.Join(cfg.Endpoints, ","))
	}
	return client.Client, nil
}

// connectError classifies a failure to connect: a refusal is a plain
// error, anything else "unavailable".
func connectError(ctx context.Context, cfg Config, err error) error {
	eps := strings.Join(cfg.Endpoints, ",")
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case status.Code(err) == codes.Unimplemented:
		return fmt.Errorf("etcd at %s: not etcd: it does not serve etcd's KV API (%w)", eps, err)
	case refused(err):
		return fmt.Errorf("etcd at %s: %w", eps, err)
	}
	return fmt.Errorf("%w: no etcd reachable at %s within %v (last error: %v)", ErrUnavailable, eps, cfg.Timeout(), err)
}

// refused reports whether etcd refused a request in a way retrying cannot
// mend: the credentials are wrong, the user lacks the permission, the
// request is malformed. (A server that is not etcd answers Unimplemented:
// Connect says so; later, an Unimplemented may be a proxy's passing 404,
// and is retried.) It is the one classifier of etcd errors: what is
// not refused is retried (by the Watcher) or "unavailable" (by Connect).
func refused(err error) bool {
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return true
	case codes.FailedPrecondition:
		// A watch cancelled by the server carries its reason here.
		return strings.Contains(err.Error(), "permission denied")
	}
	return false
}

// Source connects to etcd and follows keys or prefixes with a Watcher:
// the source of `nodewatch key`. Connecting is part of the run, so a run's
// timeout covers it.
type Source struct {
	Config Config
	// Watcher says what to follow; Run sets its Client.
	Watcher Watcher
}

// Run connects (see Connect; it counts the first key followed), then
// runs the Watcher until ctx ends or etcd refuses for good; it closes the
// client it opened. Connecting and watching tell the user of losses as
// one (a dial.Outage over the Watcher's Logf and Debugf).
func (s *Source) Run(ctx context.Context, out flow.Sink) error {
	cfg := s.config()
	defer cfg.Outage.Stop()
	if cfg.Conns == nil {
		cfg.Conns = dial.NewConns()
	}
	client, err := s.connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	w := s.Watcher
	w.Client, w.Keepalive, w.Conns, w.outage = client, cfg.Keepalive, cfg.Conns, cfg.Outage
	return w.Run(ctx, out)
}

// List connects, then reads the state once with the Watcher's List (page
// by page, in ascending key order); it closes the client it opened.
func (s *Source) List(ctx context.Context, page func([]flow.Change) error) (int64, error) {
	cfg := s.config()
	defer cfg.Outage.Stop()
	client, err := s.connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	w := s.Watcher
	w.Client, w.outage = client, cfg.Outage
	return w.List(ctx, page)
}

// connect connects (Connect) with the first of what the Watcher
// follows: a refusal of the others comes from the listing.
func (s *Source) connect(ctx context.Context, cfg Config) (*clientv3.Client, error) {
	keys := Followed(s.Watcher.Keys, s.Watcher.Prefix)
	if len(keys) == 0 {
		return nil, errors.New("etcdkv: a Watcher without Keys")
	}
	return Connect(ctx, cfg, keys[0], s.Watcher.Prefix)
}

// config is Config with an Outage of its own, over the Watcher's Logf
// and Debugf.
func (s *Source) config() Config {
	cfg := s.Config
	cfg.Outage = &dial.Outage{Server: "etcd", Endpoints: strings.Join(cfg.Endpoints, ","), Deadline: cfg.Timeout(),
		Logf: s.Watcher.Logf, Debugf: s.Watcher.Debugf}
	return cfg
}
