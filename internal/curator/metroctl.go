package curator

import (
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodewatch/nodewatch/internal/dial"
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
	keyFile := dial.File{Path: filepath.Join(dir, MetroctlOwnerKey)}
	block, err := dial.ReadPEM(keyFile, MetroctlKeyType)
	if err != nil {
		return tls.Certificate{}, err
	}
	if len(block.Bytes) != ed25519.PrivateKeySize {
		return tls.Certificate{}, fmt.Errorf("%s: the key is %d bytes long, want %d (a raw Ed25519 private key)", keyFile, len(block.Bytes), ed25519.PrivateKeySize)
	}
	key := ed25519.PrivateKey(block.Bytes)
	certFile := dial.File{Path: filepath.Join(dir, MetroctlOwnerCert)}
	cert, err := dial.ReadCertificate(certFile)
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
	ca, err := dial.ReadCertificate(dial.File{Path: filepath.Join(dir, MetroctlCA)})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}

// DefaultMetroctlDir returns metroctl's own configuration directory,
// $XDG_CONFIG_HOME/metroctl (XDG_CONFIG_HOME defaulting to ~/.config, as
// getenv has them), when it holds an owner key; "" otherwise.
func DefaultMetroctlDir(getenv func(string) string) string {
	base := getenv("XDG_CONFIG_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		base = filepath.Join(home, ".config")
	}
	dir := filepath.Join(base, "metroctl")
	if _, err := os.Stat(filepath.Join(dir, MetroctlOwnerKey)); err != nil {
		return ""
	}
	return dir
}

// MissingCAError: metroctl's directory has no cluster CA yet (metroctl
// writes it when it first connects).
type MissingCAError struct{ Err error }

func (e *MissingCAError) Error() string {
	return e.Err.Error() + " (metroctl writes it when it first connects)"
}
func (e *MissingCAError) Unwrap() error { return e.Err }

// AddMetroctl adds metroctl's owner credentials in dir to t: the owner's
// certificate as the client certificate and, with roots, the cluster CA
// as the roots that verify servers. A missing owner certificate says that
// `metroctl takeownership` writes it; a missing CA is a *MissingCAError.
func AddMetroctl(t *dial.TLS, dir string, roots bool) error {
	kp, err := LoadMetroctlOwner(dir)
	if errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), MetroctlOwnerCert) {
		err = fmt.Errorf("%w (metroctl takeownership writes it)", err)
	}
	if err != nil {
		return err
	}
	certFile := filepath.Join(dir, MetroctlOwnerCert)
	if err := dial.CheckValid(dial.File{Path: certFile}, kp.Leaf); err != nil {
		return err
	}
	t.Config.Certificates, t.Client = []tls.Certificate{kp}, "the owner certificate in "+certFile
	if !roots {
		return nil
	}
	pool, err := LoadMetroctlCA(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return &MissingCAError{err}
	}
	if err != nil {
		return err
	}
	t.Config.RootCAs, t.Roots = pool, "the cluster CA in "+filepath.Join(dir, MetroctlCA)
	return nil
}
