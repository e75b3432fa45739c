package curator

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// ClientTLS adapts a client TLS configuration to Metropolis: node
// certificates are named after node ids, not addresses, so when t names
// no server (ServerName "") but has roots (the cluster CA), the server's
// chain is verified against those roots without a host-name check. t is
// changed in place and returned; otherwise it is left as it is.
func ClientTLS(t *tls.Config) *tls.Config {
	if t.ServerName != "" || t.RootCAs == nil {
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
