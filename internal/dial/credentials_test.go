package dial

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// selfSigned returns a server certificate that no CA signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestCanceledHandshakeKeepsCause: a handshake cut short because the
// client gave up (its context canceled, as when a run's dial timeout
// ends it) does not replace why an earlier handshake failed, which
// Explain then says instead of "context canceled".
func TestCanceledHandshakeKeepsCause(t *testing.T) {
	srv := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	addr := testkit.Serve(t, func(c net.Conn) { tls.Server(c, srv).Handshake() })
	creds := (&TLS{Config: &tls.Config{RootCAs: x509.NewCertPool()}, Roots: "the CA in ca.pem"}).Credentials(true)
	handshake := func(ctx context.Context) error {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_, _, err = creds.ClientHandshake(ctx, addr, raw)
		return err
	}
	first := handshake(context.Background())
	if first == nil || !strings.Contains(first.Error(), "is not signed by the CA in ca.pem") {
		t.Fatalf("first handshake: %v", first)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := handshake(ctx); err == nil {
		t.Fatal("a handshake with a canceled context succeeded")
	}
	if got := creds.Explain(context.DeadlineExceeded); got.Error() != first.Error() {
		t.Fatalf("Explain says %q, want the first failure, %q", got, first)
	}
}
