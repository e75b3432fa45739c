package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodewatch/nodewatch/internal/curator"
)

// tlsFlags are the client TLS flags shared by etcd and the Curator.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cacert", EnvVars: []string{"NODEWATCH_CACERT"}, Usage: "verify servers with the CA certificates in `FILE`", TakesFile: true},
		&cli.StringFlag{Name: "cert", EnvVars: []string{"NODEWATCH_CERT"}, Usage: "client certificate `FILE` (PEM)", TakesFile: true},
		&cli.StringFlag{Name: "key", EnvVars: []string{"NODEWATCH_KEY"}, Usage: "client key `FILE` (PEM: PKCS#8, SEC 1 or PKCS#1)", TakesFile: true},
		&cli.StringFlag{Name: "tls-server-name", EnvVars: []string{"NODEWATCH_TLS_SERVER_NAME"}, Usage: "expect `NAME` in the server certificate"},
		&cli.BoolFlag{Name: "insecure-skip-tls-verify", Usage: "TLS without verifying the server's certificate (unsafe)"},
	}
}

// curatorTLSFlags are the client TLS flags only the Curator has.
func curatorTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "tls", Usage: "TLS with no file given: verify servers with the system's CAs"},
		&cli.StringFlag{
			Name:        "metroctl-config",
			EnvVars:     []string{"NODEWATCH_METROCTL_CONFIG"},
			Usage:       "metroctl's owner credentials in `DIR` (owner.pem, owner-key.pem, ca.pem); '' for none",
			DefaultText: "$XDG_CONFIG_HOME/metroctl if it has owner-key.pem, with no other TLS flag",
			TakesFile:   true,
		},
	}
}

// clientTLS is the client side of TLS as the flags ask for it, and what
// messages about a failed connection say of it.
type clientTLS struct {
	config *tls.Config // nil: plaintext
	// roots names the CA that verifies servers ("the CA in ca.pem"), ""
	// for the system's.
	roots string
	// client names the client certificate ("the certificate in
	// cert.pem"), "" for none.
	client string
	// howTLS, howRoots, howClient: the flags that ask for TLS, that give
	// the server's CA, and that give a client certificate.
	howTLS, howRoots, howClient string
	// chainOnly says how to verify the chain only (the Curator's node
	// certificates name no address).
	chainOnly string
	// metroctlDefault is metroctl's directory when its credentials were
	// used because they exist, not because a flag named them.
	metroctlDefault string
}

// parseClientTLS reads the TLS flags; curatorSide adds those only the
// Curator has (--tls, --metroctl-config).
func parseClientTLS(c *cli.Context, e *env, curatorSide bool) (*clientTLS, error) {
	ca, cert, key, name := c.String("cacert"), c.String("cert"), c.String("key"), c.String("tls-server-name")
	skipVerify := c.Bool("insecure-skip-tls-verify")
	ct := &clientTLS{howTLS: "--cacert FILE or an https:// endpoint", howRoots: "--cacert FILE", howClient: "--cert FILE and --key FILE"}
	wantTLS, metroctl := false, ""
	if curatorSide {
		ct.howTLS, ct.howRoots, ct.howClient = "--cacert FILE, --metroctl-config DIR or --tls", "--cacert FILE or --metroctl-config DIR", "--cert/--key or --metroctl-config DIR"
		ct.chainOnly = "a Metropolis node's certificate names no address: give the cluster CA with --cacert FILE or --metroctl-config DIR, which check the chain only"
		wantTLS = c.Bool("tls")
		if c.IsSet("metroctl-config") {
			metroctl = c.String("metroctl-config")
		} else if ca == "" && cert == "" && key == "" && name == "" && !skipVerify && !wantTLS {
			metroctl = defaultMetroctl(e.getenv)
			ct.metroctlDefault = metroctl
		}
	}
	switch {
	case (cert == "") != (key == ""):
		return nil, usagef("--cert and --key go together")
	case metroctl != "" && cert != "":
		return nil, usagef("--metroctl-config %s and --cert/--key both give a client certificate: give one of them", metroctl)
	case skipVerify && ca != "":
		return nil, usagef("--insecure-skip-tls-verify and --cacert: the one turns off the check the other sets up; give one of them")
	case skipVerify && name != "":
		return nil, usagef("--insecure-skip-tls-verify and --tls-server-name: the one turns off the check the other sets up; give one of them")
	}
	if ca == "" && cert == "" && name == "" && metroctl == "" && !skipVerify && !wantTLS {
		return ct, nil
	}
	t := &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pool, err := loadCA(ca)
		if err != nil {
			return nil, usagef("--cacert: %v", err)
		}
		t.RootCAs, ct.roots = pool, "the CA in "+ca
	}
	if cert != "" {
		kp, err := loadKeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		t.Certificates, ct.client = []tls.Certificate{kp}, "the certificate in "+cert
	}
	if metroctl != "" {
		if err := ct.loadMetroctl(t, metroctl, ca == "" && !skipVerify); err != nil {
			return nil, err
		}
	}
	if skipVerify {
		t.InsecureSkipVerify = true
		e.logf("warning: --insecure-skip-tls-verify: the server's certificate is not checked; anyone on the way to it can pose as the server and read what it sends")
	}
	ct.config = t
	return ct, nil
}

// defaultMetroctl returns metroctl's own configuration directory,
// $XDG_CONFIG_HOME/metroctl (XDG_CONFIG_HOME defaulting to ~/.config),
// when it holds an owner key; "" otherwise.
func defaultMetroctl(getenv func(string) string) string {
	base := getenv("XDG_CONFIG_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		base = filepath.Join(home, ".config")
	}
	dir := filepath.Join(base, "metroctl")
	if _, err := os.Stat(filepath.Join(dir, curator.MetroctlOwnerKey)); err != nil {
		return ""
	}
	return dir
}

// loadMetroctl adds the owner's certificate in metroctl's directory dir
// to t, and the cluster CA in it, with roots.
func (ct *clientTLS) loadMetroctl(t *tls.Config, dir string, roots bool) error {
	fail := func(err error) error {
		if ct.metroctlDefault != "" {
			return usagef("metroctl's credentials (used because %s exists; --metroctl-config '' to connect without them): %v", filepath.Join(dir, curator.MetroctlOwnerKey), err)
		}
		return usagef("--metroctl-config: %v", err)
	}
	kp, err := curator.LoadMetroctlOwner(dir)
	if errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), curator.MetroctlOwnerCert) {
		err = fmt.Errorf("%w (metroctl takeownership writes it)", err)
	}
	if err != nil {
		return fail(err)
	}
	certFile := filepath.Join(dir, curator.MetroctlOwnerCert)
	if err := checkValidity(certFile, kp.Leaf); err != nil {
		return fail(err)
	}
	t.Certificates, ct.client = []tls.Certificate{kp}, "the owner certificate in "+certFile
	if !roots {
		return nil
	}
	pool, err := curator.LoadMetroctlCA(dir)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w (metroctl writes it when it first connects; or give the CA with --cacert FILE)", err)
	}
	if err != nil {
		return fail(err)
	}
	t.RootCAs, ct.roots = pool, "the cluster CA in "+filepath.Join(dir, curator.MetroctlCA)
	return nil
}

// loadCA reads the CA certificates in file.
func loadCA(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// loadKeyPair reads --cert and --key, and checks that they belong
// together and that the certificate is valid now.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, usagef("--cert: %v", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, usagef("--key: %v", err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "does not match"):
			return kp, usagef("--cert %s and --key %s do not belong together: the key is not the certificate's", certFile, keyFile)
		case strings.Contains(msg, "certificate input"):
			return kp, usagef("--cert %s: %v", certFile, err)
		case strings.Contains(msg, "key input"), strings.Contains(msg, "parse private key"):
			return kp, usagef("--key %s: %v (want a PEM private key: PKCS#8, PKCS#1 or SEC 1)", keyFile, err)
		}
		return kp, usagef("--cert %s, --key %s: %v", certFile, keyFile, err)
	}
	if err := checkValidity(certFile, kp.Leaf); err != nil {
		return kp, usagef("--cert %v", err)
	}
	return kp, nil
}

// checkValidity says when cert, read from file, is not valid now.
func checkValidity(file string, cert *x509.Certificate) error {
	if p := validityProblem(cert, time.Now()); p != "" {
		return fmt.Errorf("%s: %s", file, p)
	}
	return nil
}

// curatorCredentials returns gRPC transport credentials for the Curator:
// TLS as curator.ClientTLS adapts it, or plaintext; either explains why a
// connection failed (see explained). The Curator client names the
// endpoint in its messages itself.
func (ct *clientTLS) curatorCredentials() credentials.TransportCredentials {
	if ct.config == nil {
		return &explained{TransportCredentials: insecure.NewCredentials(), ct: ct}
	}
	t := curator.ClientTLS(ct.config)
	return &explained{TransportCredentials: credentials.NewTLS(t), config: t, ct: ct}
}

// etcdCredentials returns gRPC transport credentials for etcd that
// explain why a connection failed, naming the endpoint.
func (ct *clientTLS) etcdCredentials() credentials.TransportCredentials {
	if ct.config == nil {
		return &explained{TransportCredentials: insecure.NewCredentials(), ct: ct, nameServer: true}
	}
	return &explained{TransportCredentials: credentials.NewTLS(ct.config), config: ct.config, ct: ct, nameServer: true}
}

// explained is transport credentials whose failures say why in the terms
// of the flags: whose certificate, signed by what, expired when, which
// flag to give. It explains the handshake's errors, and those of a
// connection that fails before its first read: a TLS 1.3 server that
// refuses the client's certificate (or its absence) says so after the
// client's handshake, and the client may see only its next write fail.
type explained struct {
	credentials.TransportCredentials             // TLS with config, or plaintext
	config                           *tls.Config // nil: plaintext
	ct                               *clientTLS
	nameServer                       bool // messages name the server they are about
}

func (x *explained) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	creds := x.TransportCredentials
	var asked atomic.Bool // the server asked for a client certificate and got none
	if x.config != nil {
		// The client certificate is chosen here, as crypto/tls would, to
		// learn whether the server asked for one.
		t := x.config.Clone()
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
	if x.nameServer {
		server = authority
	}
	if x.config != nil && x.config.ServerName != "" {
		// gRPC checks the certificate for the authority it dials, which
		// etcd's client sets to the endpoint's host.
		authority = x.config.ServerName
	}
	conn, info, err := creds.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, x.explain(server, err, asked.Load())
	}
	return &explainedConn{Conn: conn, x: x, server: server, asked: asked.Load()}, info, nil
}

func (x *explained) Clone() credentials.TransportCredentials {
	c := *x
	c.TransportCredentials = x.TransportCredentials.Clone()
	return &c
}

// explainedConn explains the errors of a connection until its first
// successful read.
type explainedConn struct {
	net.Conn
	x      *explained
	server string
	asked  bool // the server asked for a client certificate and got none
	works  atomic.Bool
}

func (c *explainedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.works.Store(true)
	}
	if err != nil && !c.works.Load() {
		err = c.x.explain(c.server, err, c.asked)
	}
	return n, err
}

func (c *explainedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && !c.works.Load() {
		err = c.x.explain(c.server, err, c.asked)
	}
	return n, err
}

// explain returns err, which ended a connection to server, said in terms
// of the flags; asked: the server asked for a client certificate and got
// none.
func (x *explained) explain(server string, err error, asked bool) error {
	ct := x.ct
	var (
		unknown x509.UnknownAuthorityError
		plain   tls.RecordHeaderError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
		remote  *net.OpError
	)
	switch {
	case x.config == nil:
		// A TLS server hangs up on a plaintext client; the client sees
		// the end of the stream, or a reset if it was still writing.
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("%s closed the connection before answering: if it serves TLS, give %s", server, ct.howTLS)
		}
	case errors.As(err, &plain):
		return fmt.Errorf("%s does not speak TLS (%v): if it serves plaintext, drop the TLS flags; else check the address", server, err)
	case errors.As(err, &unknown) && unknown.Cert != nil:
		if ct.roots == "" {
			return fmt.Errorf("%s (%s) is not signed by a CA this system trusts: give the server's CA with %s", certOf(server), describe(unknown.Cert), ct.howRoots)
		}
		return fmt.Errorf("%s (%s) is not signed by %s", certOf(server), describe(unknown.Cert), ct.roots)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		c := invalid.Cert
		if time.Now().Before(c.NotBefore) {
			return fmt.Errorf("%s (%s) is not valid before %s", certOf(server), describe(c), c.NotBefore.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("%s (%s) expired at %s", certOf(server), describe(c), c.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, &host) && host.Certificate != nil:
		msg := fmt.Sprintf("%s (%s) is not for %s (%v): --tls-server-name NAME expects another name", certOf(server), describe(host.Certificate), host.Host, host)
		if ct.chainOnly != "" {
			msg += "; " + ct.chainOnly
		}
		return errors.New(msg)
	case asked && ct.client == "":
		return fmt.Errorf("%s requires a client certificate (%v): give %s", server, err, ct.howClient)
	case asked:
		return fmt.Errorf("%s requires a client certificate signed by a CA it trusts, and %s is not (%v)", server, ct.client, err)
	case errors.As(err, &remote) && remote.Op == "remote error":
		if ct.client != "" {
			return fmt.Errorf("%s refused the connection (%v); the client certificate was %s", server, err, ct.client)
		}
		return fmt.Errorf("%s refused the connection (%v)", server, err)
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
