package dial

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// File is a file the user named, with the flag that named it, as the
// loader's errors name it: "--cert cert.pem: the certificate expired at
// …". Flag is "" for a file no flag names alone (one of metroctl's, in the
// directory of --metroctl-config): its errors name the path only.
type File struct {
	Flag, Path string
}

// String returns f as messages name it: the flag and the path.
func (f File) String() string {
	if f.Flag == "" {
		return f.Path
	}
	return f.Flag + " " + f.Path
}

// read reads f; an error names f and what went wrong, without the path
// again. It wraps the file system's error (errors.Is(err,
// fs.ErrNotExist) holds for a missing file).
func (f File) read() ([]byte, error) {
	b, err := os.ReadFile(f.Path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return b, nil
}

// LoadCertPool reads the CA certificates in f (every PEM CERTIFICATE
// block). An error names f and what is wrong with it.
func LoadCertPool(f File) (*x509.CertPool, error) {
	data, err := f.read()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", f)
	}
	return pool, nil
}

// LoadKeyPair reads a certificate and its key (PEM: the key PKCS#8, SEC 1
// or PKCS#1) and checks that they belong together; the result has its
// Leaf. An error names the file, and the flag, and what is wrong: missing,
// unreadable, no PEM block of the kind, unparsable, or a key that is not
// the certificate's. Whether the certificate is valid now is CheckValid's.
func LoadKeyPair(cert, key File) (tls.Certificate, error) {
	certPEM, err := cert.read()
	if err != nil {
		return tls.Certificate{}, err
	}
	if !hasPEM(certPEM, func(typ string) bool { return typ == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("%s: no PEM certificate in it", cert)
	}
	keyPEM, err := key.read()
	if err != nil {
		return tls.Certificate{}, err
	}
	if !hasPEM(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("%s: no PEM private key in it", key)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil {
		return kp, nil
	}
	msg := strings.TrimPrefix(err.Error(), "tls: ")
	switch {
	case strings.Contains(msg, "does not match"):
		return kp, fmt.Errorf("%s and %s do not belong together: the key is not the certificate's", cert, key)
	case strings.Contains(msg, "key input"), strings.Contains(msg, "private key"):
		return kp, fmt.Errorf("%s: %s (want a PEM private key: PKCS#8, PKCS#1 or SEC 1)", key, msg)
	}
	return kp, fmt.Errorf("%s: %s", cert, msg)
}

// ReadPEM reads the first PEM block of f, which must be of type typ. An
// error names f and what is wrong with it.
func ReadPEM(f File, typ string) (*pem.Block, error) {
	data, err := f.read()
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%s: no PEM data in it", f)
	case block.Type != typ:
		return nil, fmt.Errorf("%s: a PEM block of type %q, want %q", f, block.Type, typ)
	}
	return block, nil
}

// ReadCertificate reads the first PEM block of f, which must be an X.509
// certificate. An error names f.
func ReadCertificate(f File) (*x509.Certificate, error) {
	block, err := ReadPEM(f, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return cert, nil
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

// ValidityProblem says why peers would refuse c at now ("the certificate
// expired at …"), or "" when it is valid then.
func ValidityProblem(c *x509.Certificate, now time.Time) string {
	switch {
	case now.After(c.NotAfter):
		return "the certificate expired at " + c.NotAfter.UTC().Format(time.RFC3339)
	case now.Before(c.NotBefore):
		return "the certificate is not valid before " + c.NotBefore.UTC().Format(time.RFC3339)
	}
	return ""
}

// CheckValid returns an error naming f when c, read from it, is not valid
// now.
func CheckValid(f File, c *x509.Certificate) error {
	if p := ValidityProblem(c, time.Now()); p != "" {
		return fmt.Errorf("%s: %s", f, p)
	}
	return nil
}
