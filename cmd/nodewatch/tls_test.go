//go:build unix

package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
)

// pki writes an Ed25519 CA and leaf certificates signed by it, the way a
// Metropolis cluster issues them: server certificates are named after
// node ids, with no address in them.
type pki struct {
	t    *testing.T
	dir  string
	ca   *x509.Certificate
	caKy ed25519.PrivateKey
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{t: t, dir: t.TempDir(), ca: ca, caKy: key}
	p.write(name+".pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(file, typ string, der []byte) string {
	path := filepath.Join(p.dir, file)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// leaf issues a certificate for cn, valid for an hour either side of
// now; it returns the certificate and key files.
func (p *pki) leaf(cn string, usage x509.ExtKeyUsage) (string, string) {
	return p.leafValid(cn, usage, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// leafValid issues a certificate for cn valid from notBefore to notAfter;
// it returns the certificate and key files.
func (p *pki) leafValid(cn string, usage x509.ExtKeyUsage, notBefore, notAfter time.Time) (string, string) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, pub, p.caKy)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.write(cn+".pem", "CERTIFICATE", der), p.write(cn+".key", "PRIVATE KEY", kder)
}

// TestNodesMutualTLS: serve with a server certificate named after a node
// id (no address in it) and required client certificates; nodes verifies
// the chain against the CA without a host-name check, as Metropolis
// clusters need. A client with a certificate from another CA, or none, is
// refused.
func TestNodesMutualTLS(t *testing.T) {
	t.Parallel()
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))

	cluster := newPKI(t, "cluster-ca")
	srvCert, srvKey := cluster.leaf("metropolis-"+idA, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := cluster.leaf("operator", x509.ExtKeyUsageClientAuth)
	caFile := filepath.Join(cluster.dir, "cluster-ca.pem")

	addr, err := embedetcd.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// 0.0.0.0 would be refused in plaintext; with TLS it is allowed. The
	// client dials the loopback address, which is not in the certificate.
	p := start(t, "serve", "--etcd", ep, "--listen", "0.0.0.0:"+strings.Split(addr, ":")[1],
		"--listen-cert", srvCert, "--listen-key", srvKey, "--listen-cacert", caFile)
	waitServing(t, p)

	stdout, stderr, code := runSync(t, "nodes", "--curator", addr, "--once",
		"--cacert", caFile, "--cert", cliCert, "--key", cliKey)
	if code != 0 || !strings.Contains(stdout, idA) {
		t.Fatalf("mTLS: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	other := newPKI(t, "other-ca")
	strangerCert, strangerKey := other.leaf("stranger", x509.ExtKeyUsageClientAuth)
	for name, args := range map[string][]string{
		"client certificate from another CA": {"--cacert", caFile, "--cert", strangerCert, "--key", strangerKey},
		"server not signed by the given CA":  {"--cacert", filepath.Join(other.dir, "other-ca.pem"), "--cert", cliCert, "--key", cliKey},
		"plaintext":                          nil,
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := runSync(t, append([]string{"nodes", "--curator", addr, "--once", "--dial-timeout", "1s"}, args...)...)
			if code != 3 {
				t.Fatalf("exit %d, want 3 (no usable connection); stderr %q", code, stderr)
			}
		})
	}
}

// waitServing waits until a serve run says it serves.
func waitServing(t *testing.T, p *proc) {
	t.Helper()
	waitStderr(t, p, "serving Curator Watch on")
}
