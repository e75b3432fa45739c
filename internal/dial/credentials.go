package dial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/quietio"
)

// Flags name, in the messages that explain a failed connection, the
// flags that would mend it. They are data: the CLI says what its flags
// are called, this package says when to give them.
type Flags struct {
	// TLS asks for TLS: "--cacert FILE or an https:// endpoint".
	TLS string
	// Roots give the server's CA: "--cacert FILE".
	Roots string
	// Client gives a client certificate: "--cert FILE and --key FILE".
	Client string
	// ServerName expects another name in the server's certificate:
	// "--tls-server-name NAME".
	ServerName string
	// ChainOnly, if set, is said too when the server's certificate is not
	// for its host: how to check the chain only (a Metropolis node's
	// certificate names no address).
	ChainOnly string
}

// TLS is the client side of TLS as the user asked for it, and what the
// explanation of a failed connection says of it. The zero value (or a nil
// *TLS) is plaintext.
type TLS struct {
	// Config is the TLS configuration; nil means plaintext.
	Config *tls.Config
	// Roots names the CA that verifies servers ("the CA in ca.pem"); ""
	// means the system's.
	Roots string
	// Client names the client certificate ("the certificate in
	// cert.pem"); "" means none.
	Client string
	// Flags are the flags to name.
	Flags Flags
}

// Credentials returns transport credentials that secure connections as t
// says (see Credentials). nameServer: messages name the server by the
// address dialled ("the certificate of 10.0.0.1:2379"), not as "the
// server" (the Curator client names the endpoint itself).
func (t *TLS) Credentials(nameServer bool) *Credentials {
	if t == nil {
		t = &TLS{}
	}
	c := &Credentials{tls: t, nameServer: nameServer, last: &lastError{}}
	if t.Config == nil {
		c.TransportCredentials = insecure.NewCredentials()
	} else {
		c.TransportCredentials = credentials.NewTLS(t.Config)
	}
	return c
}

// CuratorTLS adapts a client TLS configuration to Metropolis: node
// certificates are named after node ids, not addresses, so when t names
// no server (ServerName "") but has roots (the cluster CA), the server's
// chain is verified against those roots without a host-name check. t is
// changed in place and returned; otherwise it is left as it is. Curator
// applies it; it is exported for servers' tests.
func CuratorTLS(t *tls.Config) *tls.Config {
	if t == nil || t.ServerName != "" || t.RootCAs == nil {
		return t
	}
	roots := t.RootCAs
	t.InsecureSkipVerify = true // replaced by the chain check below
	t.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
	return t
}

// Credentials are gRPC transport credentials (TLS, or plaintext) whose
// failures say why in the terms of the user's flags: whose certificate,
// signed by what, expired when, which flag to give. They explain the
// handshake's errors, and those of a connection that fails before its
// first read: a TLS 1.3 server that refuses the client's certificate (or
// its absence) says so after the client's handshake, and the client may
// see only its next write fail. They keep the last such failure, which
// Explain puts in place of an error that only says that time ran out
// (etcd's client retries failed connections until its dial timeout, and
// then says only that). They are safe for concurrent use; clones share
// the last failure.
type Credentials struct {
	credentials.TransportCredentials // TLS with tls.Config, or plaintext
	tls                              *TLS
	nameServer                       bool // messages name the server they are about
	last                             *lastError
	// outage, if set, is told of every failure kept (Outage.Retry), and
	// of each connection's first answer (Outage.Reached).
	outage *Outage
}

// lastError is the last failure of the connections of a Credentials and
// its clones.
type lastError struct{ p atomic.Pointer[error] }

func (l *lastError) set(err error) { l.p.Store(&err) }

func (l *lastError) get() error {
	if p := l.p.Load(); p != nil {
		return *p
	}
	return nil
}

// keep keeps err, a failure of a connection to server, as the last.
func (c *Credentials) keep(server string, err error) {
	c.last.set(err)
	if c.outage != nil {
		c.outage.Retry(server, err)
	}
}

// Explain returns err, or, when err only says that time ran out and a
// connection these credentials secured failed, that failure, explained,
// which says why.
func (c *Credentials) Explain(err error) error {
	last := c.last.get()
	if last == nil || !(errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		return err
	}
	return last
}

// Dial dials addr (a TCP HOST:PORT, or unix:PATH) for gRPC's
// WithContextDialer, and keeps a failure, so that Explain can say why no
// connection was made ("connection refused") where the client says only
// that time ran out.
func (c *Credentials) Dial(ctx context.Context, addr string) (net.Conn, error) {
	network, address := "tcp", addr
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", strings.TrimPrefix(path, "//")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil && ctx.Err() == nil {
		c.keep(addr, err)
	}
	return conn, err
}

// ClientHandshake implements credentials.TransportCredentials.
func (c *Credentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	creds := c.TransportCredentials
	config := c.tls.Config
	var asked atomic.Bool // the server asked for a client certificate and got none
	if config != nil {
		// The client certificate is chosen here, as crypto/tls would, to
		// learn whether the server asked for one.
		t := config.Clone()
		certs := t.Certificates
		t.Certificates = nil
		t.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			for i := range certs {
				if cri.SupportsCertificate(&certs[i]) == nil {
					return &certs[i], nil
				}
			}
			asked.Store(true)
			return &tls.Certificate{}, nil
		}
		creds = credentials.NewTLS(t)
	}
	server := "the server"
	if c.nameServer {
		server = authority
	}
	if config != nil && config.ServerName != "" {
		// gRPC checks the certificate for the authority it dials, which
		// etcd's client sets to the endpoint's host.
		authority = config.ServerName
	}
	conn, info, err := creds.ClientHandshake(ctx, authority, quietio.Conn(raw))
	if err != nil {
		err = c.explain(server, err, asked.Load())
		// A handshake cut short because the client gave up says nothing
		// of the server: it must not hide why an earlier one failed.
		if ctx.Err() == nil || c.last.get() == nil {
			c.keep(server, err)
		}
		return nil, nil, err
	}
	return &explainedConn{Conn: conn, c: c, server: server, asked: asked.Load()}, info, nil
}

// Clone implements credentials.TransportCredentials.
func (c *Credentials) Clone() credentials.TransportCredentials {
	cc := *c
	cc.TransportCredentials = c.TransportCredentials.Clone()
	return &cc
}

// explainedConn explains, and keeps, the errors of a connection until its
// first successful read.
type explainedConn struct {
	net.Conn
	c      *Credentials
	server string
	asked  bool // the server asked for a client certificate and got none
	works  atomic.Bool
}

func (ec *explainedConn) Read(b []byte) (int, error) {
	n, err := ec.Conn.Read(b)
	if n > 0 && !ec.works.Load() && !ec.works.Swap(true) && ec.c.outage != nil {
		ec.c.outage.Reached() // the server answers
	}
	if err != nil && !ec.works.Load() {
		err = ec.c.explain(ec.server, err, ec.asked)
		ec.c.keep(ec.server, err)
	}
	return n, err
}

func (ec *explainedConn) Write(b []byte) (int, error) {
	n, err := ec.Conn.Write(b)
	if err != nil && !ec.works.Load() {
		err = ec.c.explain(ec.server, err, ec.asked)
		ec.c.keep(ec.server, err)
	}
	return n, err
}

// explain returns err, which ended a connection to server, said in terms
// of the flags; asked: the server asked for a client certificate and got
// none.
func (c *Credentials) explain(server string, err error, asked bool) error {
	t := c.tls
	var (
		unknown x509.UnknownAuthorityError
		plain   tls.RecordHeaderError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
		remote  *net.OpError
	)
	switch {
	case t.Config == nil:
		// A TLS server hangs up on a plaintext client; the client sees
		// the end of the stream, or a reset if it was still writing.
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return tlsFailure("%s closed the connection before answering: if it serves TLS, give %s", server, t.Flags.TLS)
		}
	case errors.As(err, &plain):
		return tlsFailure("%s does not speak TLS (%v): if it serves plaintext, drop the TLS flags; else check the address", server, err)
	case errors.As(err, &unknown) && unknown.Cert != nil:
		if t.Roots == "" {
			return tlsFailure("%s (%s) is not signed by a CA this system trusts: give the server's CA with %s", certOf(server), describe(unknown.Cert), t.Flags.Roots)
		}
		return tlsFailure("%s (%s) is not signed by %s", certOf(server), describe(unknown.Cert), t.Roots)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		cert := invalid.Cert
		if time.Now().Before(cert.NotBefore) {
			return tlsFailure("%s (%s) is not valid before %s", certOf(server), describe(cert), cert.NotBefore.UTC().Format(time.RFC3339))
		}
		return tlsFailure("%s (%s) expired at %s", certOf(server), describe(cert), cert.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, &host) && host.Certificate != nil:
		msg := fmt.Sprintf("%s (%s) is not for %s (%v): %s expects another name", certOf(server), describe(host.Certificate), host.Host, host, t.Flags.ServerName)
		if t.Flags.ChainOnly != "" {
			msg += "; " + t.Flags.ChainOnly
		}
		return tlsFailure("%s", msg)
	case asked && t.Client == "":
		return tlsFailure("%s requires a client certificate (%v): give %s", server, err, t.Flags.Client)
	case asked:
		return tlsFailure("%s requires a client certificate signed by a CA it trusts, and %s is not (%v)", server, t.Client, err)
	case errors.As(err, &remote) && remote.Op == "remote error":
		if t.Client != "" {
			return tlsFailure("%s refused the connection (%v); the client certificate was %s", server, err, t.Client)
		}
		return tlsFailure("%s refused the connection (%v)", server, err)
	}
	return err
}

// certOf names the certificate of server in a message.
func certOf(server string) string {
	if server == "the server" {
		return "the server's certificate"
	}
	return "the certificate of " + server
}

// describe names a certificate in a message.
func describe(c *x509.Certificate) string {
	return fmt.Sprintf("CN=%s, issued by CN=%s", c.Subject.CommonName, c.Issuer.CommonName)
}
