package curator

import (
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// The files of metroctl's configuration directory that hold an owner's
// credentials. metroctl writes them: the key when it first needs one, the
// certificate at `metroctl takeownership`, the CA when it first connects.
const (
	MetroctlOwnerCert = "owner.pem"     // the owner's certificate, a PEM CERTIFICATE
	MetroctlOwnerKey  = "owner-key.pem" // its key, a PEM MetroctlKeyType
	MetroctlCA        = "ca.pem"        // the cluster CA's certificate, a PEM CERTIFICATE
)

// MetroctlKeyType is the PEM block type of metroctl's owner key: the raw
// 64-byte Ed25519 private key (seed, then public key), as Go's
// ed25519.PrivateKey holds it, not PKCS#8.
const MetroctlKeyType = "METROPOLIS INITIAL OWNER PRIVATE KEY"

// LoadMetroctlOwner reads the owner certificate and key from metroctl's
// configuration directory dir. An error names the file and what is wrong
// with it: missing, unreadable, not PEM, a block of the wrong type, a key
// of the wrong length, or a key that is not the certificate's.
func LoadMetroctlOwner(dir string) (tls.Certificate, error) {
	keyFile := filepath.Join(dir, MetroctlOwnerKey)
	block, err := readPEM(keyFile, MetroctlKeyType)
	if err != nil {
		return tls.Certificate{}, err
	}
	if len(block.Bytes) != ed25519.PrivateKeySize {
		return tls.Certificate{}, fmt.Errorf("%s: the key is %d bytes long, want %d (a raw Ed25519 private key)", keyFile, len(block.Bytes), ed25519.PrivateKeySize)
	}
	key := ed25519.PrivateKey(block.Bytes)
	certFile := filepath.Join(dir, MetroctlOwnerCert)
	cert, err := readCertificate(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if pub, ok := cert.PublicKey.(ed25519.PublicKey); !ok || !pub.Equal(key.Public()) {
		return tls.Certificate{}, fmt.Errorf("%s is not the key of the certificate in %s", keyFile, certFile)
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}

// LoadMetroctlCA reads the cluster CA from metroctl's configuration
// directory dir. An error names the file.
func LoadMetroctlCA(dir string) (*x509.CertPool, error) {
	ca, err := readCertificate(filepath.Join(dir, MetroctlCA))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}

// readCertificate reads the first PEM block of file, which must be an
// X.509 certificate.
func readCertificate(file string) (*x509.Certificate, error) {
	block, err := readPEM(file, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cert, nil
}

// readPEM reads the first PEM block of file, which must be of type typ.
func readPEM(file, typ string) (*pem.Block, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err // *fs.PathError names the file
	}
	block, _ := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%s: no PEM data in it", file)
	case block.Type != typ:
		return nil, fmt.Errorf("%s: a PEM block of type %q, want %q", file, block.Type, typ)
	}
	return block, nil
}
