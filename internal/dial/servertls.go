package dial

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync/atomic"
)

// ServerTLS is a server's TLS: a certificate and key, and optionally the
// CAs that client certificates must be signed by, read from their files
// and read again by Reload. Every handshake uses what was last read
// successfully, so a rotated certificate takes effect for new
// connections while open ones go on as they are. Its fields must not
// change after LoadServerTLS; its methods are safe for concurrent use.
type ServerTLS struct {
	// Cert, Key and ClientCA are the files; ClientCA.Path "" asks for no
	// client certificates.
	Cert, Key, ClientCA File

	cur atomic.Pointer[serverFiles] // never nil once LoadServerTLS returned
}

// serverFiles is one reading of the files.
type serverFiles struct {
	cert *tls.Certificate // Leaf set
	// forClient is the whole configuration of a handshake with client
	// CAs: certificate and client CAs from the same reading.
	forClient *tls.Config
}

// LoadServerTLS reads the files, or says which one is unusable and why
// (naming its flag and path, see LoadKeyPair and LoadCertPool). A
// certificate that is not valid now is read all the same: see
// ValidityProblem.
func LoadServerTLS(cert, key, clientCA File) (*ServerTLS, error) {
	s := &ServerTLS{Cert: cert, Key: key, ClientCA: clientCA}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. If they are usable, new handshakes use
// them and Reload returns the new certificate; otherwise it returns why,
// and handshakes go on with what they used before.
func (s *ServerTLS) Reload() (*x509.Certificate, error) {
	kp, err := LoadKeyPair(s.Cert, s.Key)
	if err != nil {
		return nil, err
	}
	f := &serverFiles{cert: &kp}
	if s.ClientCA.Path != "" {
		pool, err := LoadCertPool(s.ClientCA)
		if err != nil {
			return nil, err
		}
		f.forClient = &tls.Config{
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2"}, // what gRPC adds to Config's
			Certificates: []tls.Certificate{kp},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		}
	}
	s.cur.Store(f)
	return kp.Leaf, nil
}

// Leaf returns the certificate handshakes use now.
func (s *ServerTLS) Leaf() *x509.Certificate { return s.cur.Load().cert.Leaf }

// Config returns a TLS configuration that always uses the latest
// successful reading.
func (s *ServerTLS) Config() *tls.Config {
	t := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
	}
	if s.ClientCA.Path != "" {
		t.ClientAuth = tls.RequireAndVerifyClientCert
		t.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().forClient, nil
		}
	}
	return t
}

// IsLoopback reports whether host only ever means this machine, where a
// server may listen without TLS.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
