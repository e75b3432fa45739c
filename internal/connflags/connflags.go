// Package connflags is the command line of a connection: the flags that
// say how to reach etcd or a Curator (endpoints, TLS and credentials,
// liveness), and their parsing into dial's configurations. Every error
// of parsing is a usage error (cmdline.Usagef) that names the flag.
package connflags

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/dial"
)

// Env is what parsing may touch of the outside world: the environment,
// the log, and the terminal that a password is asked for on.
type Env struct {
	Getenv func(string) string
	Logf   func(format string, args ...any)
	Stdin  io.Reader
	Stderr io.Writer
}

// Etcd are the flags that reach etcd.
func Etcd() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "etcd", Value: "127.0.0.1:2379", EnvVars: []string{"NODEWATCH_ETCD"}, Usage: "etcd endpoints, comma-separated `URL[,URL…]`"},
		&cli.StringFlag{Name: "user", EnvVars: []string{"NODEWATCH_USER"}, Usage: "etcd user `NAME[:PASSWORD]`; without a password, from NODEWATCH_PASSWORD or asked on the terminal"},
	}, append(tlsFlags(), keepaliveFlags()...)...)
}

// ParseEtcd reads the Etcd flags (all but --dial-timeout, which is the
// command's). A --user without a password asks for one on the terminal.
func ParseEtcd(c *cli.Context, e Env) (dial.EtcdConfig, error) {
	o := dial.EtcdConfig{Endpoints: cmdline.List(c.String("etcd"))}
	if len(o.Endpoints) == 0 {
		return o, cmdline.Usagef("--etcd: no endpoint given")
	}
	for _, ep := range o.Endpoints {
		if err := etcdEndpoint(ep); err != nil {
			return o, err
		}
	}
	ct, err := parseClientTLS(c, e, false)
	if err != nil {
		return o, err
	}
	var plain, secure string // an http:// and an https:// endpoint
	for _, ep := range o.Endpoints {
		switch {
		case strings.HasPrefix(ep, "http://"):
			plain = ep
		case strings.HasPrefix(ep, "https://"):
			secure = ep
		}
	}
	switch {
	case plain != "" && secure != "":
		return o, cmdline.Usagef("--etcd: %s is plaintext and %s is TLS: give all endpoints one scheme (or HOST:PORT)", plain, secure)
	case plain != "" && ct.Config != nil:
		return o, cmdline.Usagef("--etcd %s: http:// is plaintext, but the TLS flags ask for TLS: use https:// or HOST:PORT", plain)
	case secure != "" && ct.Config == nil:
		ct.Config = &tls.Config{MinVersion: tls.VersionTLS12} // the system's roots
	}
	o.TLS = &ct.TLS
	if o.Keepalive, err = parseKeepalive(c); err != nil {
		return o, err
	}
	if u := c.String("user"); u != "" {
		if o.Username, o.Password, err = etcdUser(c.Context, e, u); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Verbose is -v, --verbose, of the commands that watch: on stderr, every
// failed attempt to reach the server, not only the line that says the
// connection is lost and the one that says it is back (see dial.Outage).
func Verbose() cli.Flag {
	return &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "also say on stderr every failed attempt to reconnect, not only the loss and the recovery"}
}

// DefaultCurator is where `nodes` looks for a Curator, and where `serve`
// listens, unless told otherwise.
func DefaultCurator() string {
	return fmt.Sprintf("127.0.0.1:%d", curator.DefaultPort)
}

// Curator are the flags that reach a Curator.
func Curator() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "curator", Value: DefaultCurator(), EnvVars: []string{"NODEWATCH_CURATOR"}, Usage: fmt.Sprintf("Curator endpoints, comma-separated `HOST:PORT[,HOST:PORT…]`; a HOST alone means port %d", curator.DefaultPort)},
	}, append(append(tlsFlags(), curatorTLSFlags()...), keepaliveFlags()...)...)
}

// CuratorConn is how to reach a Curator, as the Curator flags say.
type CuratorConn struct {
	Endpoints []string
	TLS       *dial.TLS
	Keepalive dial.Keepalive
	// metroctlDefault: the credentials are metroctl's, found in this
	// directory without a flag naming it.
	metroctlDefault string
}

// ParseCurator reads the Curator flags.
func ParseCurator(c *cli.Context, e Env) (*CuratorConn, error) {
	o := &CuratorConn{Endpoints: cmdline.List(c.String("curator"))}
	if len(o.Endpoints) == 0 {
		return nil, cmdline.Usagef("--curator: no endpoint given")
	}
	for i, ep := range o.Endpoints {
		var err error
		if o.Endpoints[i], err = curatorEndpoint(ep); err != nil {
			return nil, err
		}
	}
	ct, err := parseClientTLS(c, e, true)
	if err != nil {
		return nil, err
	}
	o.TLS, o.metroctlDefault = &ct.TLS, ct.metroctlDefault
	if o.Keepalive, err = parseKeepalive(c); err != nil {
		return nil, err
	}
	return o, nil
}

// Explain adds to err, a failure to reach the Curator, that metroctl's
// credentials were used without a flag asking for them.
func (o *CuratorConn) Explain(err error) error {
	if o.metroctlDefault != "" && errors.Is(err, dial.ErrUnavailable) {
		return fmt.Errorf("%w (with metroctl's credentials in %s, used because they exist; --metroctl-config '' to connect without them)", err, o.metroctlDefault)
	}
	return err
}
