package etcdkv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/nodeset"
)

// DefaultDialTimeout bounds Connect when Config.DialTimeout is 0.
const DefaultDialTimeout = 5 * time.Second

// ErrUnavailable is wrapped by the error Connect returns when no etcd
// endpoint answered within the dial timeout (`nodewatch` exits 3 on it).
var ErrUnavailable = errors.New("etcd unavailable")

// Config says how to reach etcd.
type Config struct {
	Endpoints          []string
	Username, Password string
	TLS                *tls.Config // nil: plaintext, or TLS with the system's roots for https:// endpoints
	// Credentials, when set, secure the connections instead of TLS
	// (which must then say whether they are TLS: its scheme handling of
	// http:// and https:// endpoints is etcd's). Their handshake errors,
	// and the read errors of a connection that never worked, are what
	// Connect reports as the last error when etcd does not answer.
	Credentials credentials.TransportCredentials
	// DialTimeout bounds connecting and the first request; 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Keepalive says how often connections and watches must prove that
	// they are alive (zero fields: the defaults).
	Keepalive dial.Keepalive
	// Conns, if set, keeps the client's connections, so that a watch
	// that found etcd silent can close them (see dial.Conns). Source
	// makes its own when nil.
	Conns *dial.Conns
}

// Connect opens an etcd client and proves the connection within the dial
// timeout by counting the keys it is about to use (key, or every key under
// it with prefix), so that a user whose role covers only that range
// passes. The caller closes the client.
//
// No answer in time is an error wrapping ErrUnavailable, naming the
// endpoints and the last error; a refusal (bad credentials, permission
// denied: see refused) is a plain error; ctx ending returns ctx.Err().
func Connect(ctx context.Context, cfg Config, key string, prefix bool) (*clientv3.Client, error) {
	dial := cfg.DialTimeout
	if dial <= 0 {
		dial = DefaultDialTimeout
	}
	tr := &transportErrors{TransportCredentials: transportCredentials(cfg)}
	var creds credentials.TransportCredentials = tr
	if cfg.Conns != nil {
		creds = cfg.Conns.Track(tr)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: dial,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		Context:     ctx,
		Logger:      zap.NewNop(),
		DialOptions: append(cfg.Keepalive.DialOptions(), grpc.WithTransportCredentials(creds)),
	})
	if err != nil {
		return nil, connectError(ctx, cfg.Endpoints, dial, tr.last(err))
	}
	pctx, cancel := context.WithTimeout(ctx, dial)
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
		return nil, connectError(ctx, cfg.Endpoints, dial, tr.last(err))
	}
	return client, nil
}

// transportCredentials returns the credentials cfg asks for: its own, or
// TLS for a TLS config or an https:// endpoint (the system's roots, as
// etcd's client has it), or plaintext.
func transportCredentials(cfg Config) credentials.TransportCredentials {
	switch {
	case cfg.Credentials != nil:
		return cfg.Credentials
	case cfg.TLS != nil:
		return credentials.NewTLS(cfg.TLS)
	}
	for _, ep := range cfg.Endpoints {
		if strings.HasPrefix(ep, "https://") {
			return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
	}
	return insecure.NewCredentials()
}

// transportErrors keeps the last error of the connections its credentials
// secure: a failed handshake, or a connection that failed before it
// delivered anything (a server that refuses the client's certificate
// says so then, after a TLS 1.3 handshake). etcd's client retries those
// until the dial timeout and then reports only that the time is up.
type transportErrors struct {
	credentials.TransportCredentials
	mu  sync.Mutex // guards err
	err error
}

func (t *transportErrors) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := t.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		t.set(err)
		return nil, nil, err
	}
	return &firstReadConn{Conn: conn, t: t}, info, nil
}

func (t *transportErrors) Clone() credentials.TransportCredentials {
	return &transportErrors{TransportCredentials: t.TransportCredentials.Clone()}
}

func (t *transportErrors) set(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err = err
}

// last returns err, or, when err only says that time ran out, the last
// transport error instead, which says why.
func (t *transportErrors) last(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil || !(errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		return err
	}
	return t.err
}

// firstReadConn reports the read errors of a connection until its first
// successful read.
type firstReadConn struct {
	net.Conn
	t     *transportErrors
	works atomic.Bool
}

func (c *firstReadConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.works.Store(true)
	}
	if err != nil && !c.works.Load() {
		c.t.set(err)
	}
	return n, err
}

// connectError classifies a failure to connect: a refusal is a plain
// error, anything else "unavailable".
func connectError(ctx context.Context, endpoints []string, dial time.Duration, err error) error {
	eps := strings.Join(endpoints, ",")
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case refused(err):
		return fmt.Errorf("etcd at %s: %w", eps, err)
	}
	return fmt.Errorf("%w: no etcd reachable at %s within %v (last error: %v)", ErrUnavailable, eps, dial, err)
}

// refused reports whether etcd refused a request in a way retrying cannot
// mend: the credentials are wrong, the user lacks the permission, the
// request is malformed. It is the one classifier of etcd errors: what is
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

// Source connects to etcd and follows a key or prefix with a Watcher: the
// source of `nodewatch key`. Connecting is part of the run, so a run's
// timeout covers it.
type Source struct {
	Config Config
	// Watcher says what to follow; Run sets its Client.
	Watcher Watcher
}

// Run connects (see Connect), then runs the Watcher until ctx ends or
// etcd refuses for good; it closes the client it opened.
func (s *Source) Run(ctx context.Context, out nodeset.Sink) error {
	cfg := s.Config
	if cfg.Conns == nil {
		cfg.Conns = dial.NewConns()
	}
	client, err := Connect(ctx, cfg, s.Watcher.Key, s.Watcher.Prefix)
	if err != nil {
		return err
	}
	defer client.Close()
	w := s.Watcher
	w.Client, w.Keepalive, w.Conns = client, cfg.Keepalive, cfg.Conns
	return w.Run(ctx, out)
}

// List connects, then reads the state once with the Watcher's List (page
// by page, in ascending key order); it closes the client it opened.
func (s *Source) List(ctx context.Context, page func([]nodeset.Change) error) (int64, error) {
	client, err := Connect(ctx, s.Config, s.Watcher.Key, s.Watcher.Prefix)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	w := s.Watcher
	w.Client = client
	return w.List(ctx, page)
}
