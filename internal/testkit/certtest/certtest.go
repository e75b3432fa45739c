// Package certtest is test scaffolding that issues certificates: a CA
// made in a test, with an Ed25519 or ECDSA key, and the certificates it
// signs, written as PEM files into a temporary directory of the test for
// the flags that read them (--cacert, --cert, --key, --listen-cert …).
// Every certificate, the CA's included, is valid from an hour ago for a
// day unless its Spec says otherwise.
package certtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KeyKind is the kind and encoding of a generated private key.
type KeyKind int

const (
	Ed25519PKCS8 KeyKind = iota // "PRIVATE KEY"
	ECDSAPKCS8                  // "PRIVATE KEY"
	ECDSASEC1                   // "EC PRIVATE KEY"
)

// Use says whom a certificate is for.
type Use int

const (
	// Client: a client, and nothing else.
	Client Use = iota
	// Server: a server on 127.0.0.1 and localhost, and a client.
	Server
	// Node: a server named after a Metropolis node, with no address or
	// host name in it, as Metropolis issues them; and a client.
	Node
)

// CA is a certificate authority made in a test. Its files are written
// into Dir: its own certificate as NAME.pem, and each certificate it
// issues as CN.pem and CN.key.
type CA struct {
	t    testing.TB
	Dir  string
	File string // the CA's certificate, PEM
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a CA named name whose key is of kind, in a new temporary
// directory of t.
func NewCA(t testing.TB, name string, kind KeyKind) *CA {
	t.Helper()
	key := newKey(t, kind)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, Dir: t.TempDir(), Cert: cert, Key: key}
	ca.File = WritePEM(t, filepath.Join(ca.Dir, name+".pem"), "CERTIFICATE", der)
	return ca
}

// Spec says what certificate to issue.
type Spec struct {
	CN  string // the subject's common name, and the files' names
	Key KeyKind
	Use Use
	// NotBefore and NotAfter bound its validity; with NotAfter zero, it
	// is valid from an hour ago for a day.
	NotBefore, NotAfter time.Time
}

// Issue issues a certificate as spec says; it returns the certificate and
// key files (named after spec.CN), the certificate and the key.
func (ca *CA) Issue(spec Spec) (certFile, keyFile string, cert *x509.Certificate, key crypto.Signer) {
	t := ca.t
	t.Helper()
	key = newKey(t, spec.Key)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: spec.CN},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if spec.Use != Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Use == Server {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if !spec.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = spec.NotBefore, spec.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	certFile = WritePEM(t, filepath.Join(ca.Dir, spec.CN+".pem"), "CERTIFICATE", der)
	keyFile = writeKey(t, filepath.Join(ca.Dir, spec.CN+".key"), key, spec.Key)
	return certFile, keyFile, cert, key
}

// ClientTLS is a TLS configuration that trusts the CA.
func (ca *CA) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// newKey generates a private key of kind.
func newKey(t testing.TB, kind KeyKind) crypto.Signer {
	t.Helper()
	if kind == Ed25519PKCS8 {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writeKey writes key to path in the encoding kind names, and returns
// path.
func writeKey(t testing.TB, path string, key crypto.Signer, kind KeyKind) string {
	t.Helper()
	var (
		der []byte
		err error
		typ = "PRIVATE KEY"
	)
	if kind == ECDSASEC1 {
		typ = "EC PRIVATE KEY"
		der, err = x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	} else {
		der, err = x509.MarshalPKCS8PrivateKey(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return WritePEM(t, path, typ, der)
}

// WritePEM writes der to path as one PEM block of type typ, readable by
// its owner only, and returns path.
func WritePEM(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
