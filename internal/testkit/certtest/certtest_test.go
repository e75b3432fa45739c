package certtest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestIssue: what Issue writes loads as a key pair of the kind asked
// for, chains to the CA, and is for what spec.Use says.
func TestIssue(t *testing.T) {
	for _, kind := range []KeyKind{Ed25519PKCS8, ECDSAPKCS8, ECDSASEC1} {
		ca := NewCA(t, "ca", kind)
		for _, tc := range []struct {
			cn     string
			use    Use
			server bool
			ips    int
		}{
			{"client", Client, false, 0},
			{"server", Server, true, 1},
			{"node", Node, true, 0},
		} {
			certFile, keyFile, cert, _ := ca.Issue(Spec{CN: tc.cn, Key: kind, Use: tc.use})
			if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
				t.Fatalf("%v %s: %v", kind, tc.cn, err)
			}
			pemKey, _ := os.ReadFile(keyFile)
			if sec1 := strings.HasPrefix(string(pemKey), "-----BEGIN EC PRIVATE KEY-----"); sec1 != (kind == ECDSASEC1) {
				t.Errorf("%v %s: key file starts %.32q", kind, tc.cn, pemKey)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			usage := x509.ExtKeyUsageClientAuth
			if tc.server {
				usage = x509.ExtKeyUsageServerAuth
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%v %s: %v", kind, tc.cn, err)
			}
			if len(cert.IPAddresses) != tc.ips || tc.ips > 0 && !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
				t.Errorf("%v %s: addresses %v", kind, tc.cn, cert.IPAddresses)
			}
		}
	}
	ca := NewCA(t, "ca", Ed25519PKCS8)
	notAfter := time.Now().Add(-time.Hour).Truncate(time.Second)
	_, _, cert, _ := ca.Issue(Spec{CN: "expired", NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter})
	if !cert.NotAfter.Equal(notAfter) {
		t.Errorf("NotAfter %v, want %v", cert.NotAfter, notAfter)
	}
}
