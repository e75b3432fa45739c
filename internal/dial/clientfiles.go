package dial

import (
	"crypto/tls"
)

// ClientFiles are the files and choices that secure a client's
// connections. Each File's Flag names it in errors.
type ClientFiles struct {
	// CA verifies servers (empty Path: the system's roots).
	CA File
	// Cert and Key are the client certificate and its key (empty Paths:
	// none).
	Cert, Key  File
	ServerName string // expect this name in the server's certificate
	SkipVerify bool   // do not verify the server's certificate at all
}

// Load reads the files into t: its Config, and what Roots and Client say
// of them in messages. A file that cannot be used, or a client
// certificate that is not valid now, is an error that names the file.
func (f ClientFiles) Load(t *TLS) error {
	c := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.SkipVerify}
	if f.CA.Path != "" {
		pool, err := LoadCertPool(f.CA)
		if err != nil {
			return err
		}
		c.RootCAs, t.Roots = pool, "the CA in "+f.CA.Path
	}
	if f.Cert.Path != "" {
		kp, err := LoadKeyPair(f.Cert, f.Key)
		if err == nil {
			err = CheckValid(f.Cert, kp.Leaf)
		}
		if err != nil {
			return err
		}
		c.Certificates, t.Client = []tls.Certificate{kp}, "the certificate in "+f.Cert.Path
	}
	t.Config = c
	return nil
}
