package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// serverTLS is serve's TLS: the certificate and key of --listen-cert and
// --listen-key, and the client CAs of --listen-cacert, read from their
// files and read again by reload. Every handshake uses what was last read
// successfully, so a rotated certificate takes effect for new connections
// while open ones go on as they are. Its methods are safe for concurrent
// use.
type serverTLS struct {
	certFile, keyFile, caFile string // caFile "": no client certificates asked for

	cur atomic.Pointer[tlsFiles] // never nil once loadServerTLS returned
}

// tlsFiles is one reading of the files.
type tlsFiles struct {
	cert *tls.Certificate // Leaf set
	// forClient is the whole configuration of a handshake with
	// --listen-cacert: certificate and client CAs from the same reading.
	forClient *tls.Config
}

// loadServerTLS reads the files, or says which one is unusable and why.
func loadServerTLS(certFile, keyFile, caFile string) (*serverTLS, error) {
	s := &serverTLS{certFile: certFile, keyFile: keyFile, caFile: caFile}
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cur.Store(f)
	return s, nil
}

// reload reads the files again. If they are usable, new handshakes use
// them and reload returns the new certificate; otherwise it returns why,
// and handshakes go on with what they used before.
func (s *serverTLS) reload() (*x509.Certificate, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cur.Store(f)
	return f.cert.Leaf, nil
}

// leaf returns the certificate handshakes use now.
func (s *serverTLS) leaf() *x509.Certificate { return s.cur.Load().cert.Leaf }

// config returns a TLS configuration that always uses the latest
// successful reading.
func (s *serverTLS) config() *tls.Config {
	t := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
	}
	if s.caFile != "" {
		t.ClientAuth = tls.RequireAndVerifyClientCert
		t.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().forClient, nil
		}
	}
	return t
}

// read reads and checks the files. Its errors name the flag, the file and
// what is wrong with it.
func (s *serverTLS) read() (*tlsFiles, error) {
	certPEM, err := os.ReadFile(s.certFile)
	if err != nil {
		return nil, fmt.Errorf("--listen-cert %s: %w", s.certFile, withoutPath(err))
	}
	if !hasPEM(certPEM, func(typ string) bool { return typ == "CERTIFICATE" }) {
		return nil, fmt.Errorf("--listen-cert %s: no PEM certificate in it", s.certFile)
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--listen-key %s: %w", s.keyFile, withoutPath(err))
	}
	if !hasPEM(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }) {
		return nil, fmt.Errorf("--listen-key %s: no PEM private key in it", s.keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return nil, fmt.Errorf("--listen-key %s: does not match the certificate in %s", s.keyFile, s.certFile)
	case err != nil && strings.Contains(err.Error(), "private key"):
		return nil, fmt.Errorf("--listen-key %s: %s", s.keyFile, strings.TrimPrefix(err.Error(), "tls: "))
	case err != nil:
		return nil, fmt.Errorf("--listen-cert %s: %s", s.certFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
	f := &tlsFiles{cert: &cert}
	if s.caFile == "" {
		return f, nil
	}
	caPEM, err := os.ReadFile(s.caFile)
	if err != nil {
		return nil, fmt.Errorf("--listen-cacert %s: %w", s.caFile, withoutPath(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--listen-cacert %s: no PEM certificate in it", s.caFile)
	}
	f.forClient = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"}, // what gRPC adds to config's
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	return f, nil
}

// hasPEM reports whether b holds a PEM block of a type that ok accepts.
func hasPEM(b []byte, ok func(typ string) bool) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if ok(block.Type) {
			return true
		}
	}
}

// withoutPath drops the path from a file error: the message names the
// file already.
func withoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// describeCert names a certificate in a log line.
func describeCert(c *x509.Certificate) string {
	return fmt.Sprintf("%q, serial %s, expires %s", c.Subject.String(), c.SerialNumber, c.NotAfter.UTC().Format(time.RFC3339))
}

// validityProblem says why clients would refuse c at now, or "".
func validityProblem(c *x509.Certificate, now time.Time) string {
	switch {
	case now.After(c.NotAfter):
		return "the certificate expired at " + c.NotAfter.UTC().Format(time.RFC3339)
	case now.Before(c.NotBefore):
		return "the certificate is not valid before " + c.NotBefore.UTC().Format(time.RFC3339)
	}
	return ""
}
