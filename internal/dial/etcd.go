package dial

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// ErrUnavailable is wrapped by every error that says no server could be
// reached in time, whichever the server (etcd, a Curator): the one error
// a caller checks for "unavailable" (`nodewatch` exits 3 on it).
var ErrUnavailable = errors.New("unavailable")

// DefaultDialTimeout bounds connecting when a config's DialTimeout is 0.
const DefaultDialTimeout = 5 * time.Second

// EtcdConfig says how to reach etcd.
type EtcdConfig struct {
	Endpoints          []string
	Username, Password string
	// TLS secures the connections and words their failures; nil (or a
	// nil Config) means plaintext, or TLS with the system's roots when an
	// endpoint is https:// (etcd's client does the same).
	TLS *TLS
	// DialTimeout bounds connecting and the first request; 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Keepalive says how often connections and watches must prove that
	// they are alive (zero fields: the defaults).
	Keepalive Keepalive
	// Conns, if set, keeps the client's connections, so that a watch
	// that found etcd silent can close them (see Conns).
	Conns *Conns
	// Outage, if set, is told of every connection that fails
	// (Outage.Retry), and of every first answer on one (Outage.Reached):
	// etcd's client connects, and retries, out of sight.
	Outage *Outage
}

// Timeout returns DialTimeout, or DefaultDialTimeout when it is 0.
func (cfg EtcdConfig) Timeout() time.Duration {
	if cfg.DialTimeout > 0 {
		return cfg.DialTimeout
	}
	return DefaultDialTimeout
}

// EtcdClient is an etcd client with the credentials that secure its
// connections, which explain its failures. The caller closes it.
type EtcdClient struct {
	*clientv3.Client
	creds *Credentials
}

// Explain returns err, which a request on c failed with, said better:
// when err only says that time ran out (etcd's client retries failed
// connections until then), the last failure of a connection instead,
// explained in the terms of the flags (see Credentials).
func (c *EtcdClient) Explain(err error) error { return c.creds.Explain(err) }

// Etcd opens an etcd client as cfg says: its TLS (with explained
// failures), its keepalive, its connections kept in cfg.Conns. It does not
// wait for a connection (etcd's client connects in the background), so
// the first request is the caller's proof; its error is best passed
// through Explain. ctx bounds the client's life as etcd's Config.Context
// does. An error is explained.
func Etcd(ctx context.Context, cfg EtcdConfig) (*EtcdClient, error) {
	t := cfg.TLS
	if t == nil || t.Config == nil {
		for _, ep := range cfg.Endpoints {
			if strings.HasPrefix(ep, "https://") {
				sys := TLS{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
				if t != nil {
					sys.Flags = t.Flags
				}
				t = &sys
				break
			}
		}
	}
	creds := t.Credentials(true)
	creds.outage = cfg.Outage
	var tc *tls.Config
	if t != nil {
		tc = t.Config
	}
	dialOptions := append(cfg.Keepalive.DialOptions(), receiveOptions()...)
	dialOptions = append(dialOptions, grpc.WithTransportCredentials(cfg.Conns.track(creds)))
	if !proxied(cfg.Endpoints) {
		// A dialer of its own keeps why a connection failed; gRPC dials
		// through an HTTPS_PROXY only without one.
		dialOptions = append(dialOptions, grpc.WithContextDialer(creds.Dial))
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.Timeout(),
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         tc,
		Context:     ctx,
		Logger:      zap.NewNop(),
		DialOptions: dialOptions,
	})
	if err != nil {
		return nil, creds.Explain(err)
	}
	return &EtcdClient{Client: client, creds: creds}, nil
}

// proxied reports whether gRPC would reach one of endpoints through an
// HTTP proxy (HTTPS_PROXY, NO_PROXY: as gRPC asks the environment).
func proxied(endpoints []string) bool {
	for _, ep := range endpoints {
		host := ep
		if _, rest, ok := strings.Cut(ep, "://"); ok {
			host = rest
		}
		if strings.HasPrefix(ep, "unix") {
			continue
		}
		u, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: host}})
		if err != nil || u != nil {
			return true
		}
	}
	return false
}
