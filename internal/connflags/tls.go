package connflags

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/dial"
)

// tlsFlags are the client TLS flags shared by etcd and the Curator.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cacert", EnvVars: []string{"NODEWATCH_CACERT"}, Usage: "verify servers with the CA certificates in `FILE`", TakesFile: true},
		&cli.StringFlag{Name: "cert", EnvVars: []string{"NODEWATCH_CERT"}, Usage: "client certificate `FILE` (PEM)", TakesFile: true},
		&cli.StringFlag{Name: "key", EnvVars: []string{"NODEWATCH_KEY"}, Usage: "client key `FILE` (PEM: PKCS#8, SEC 1 or PKCS#1)", TakesFile: true},
		&cli.StringFlag{Name: "tls-server-name", EnvVars: []string{"NODEWATCH_TLS_SERVER_NAME"}, Usage: "expect `NAME` in the server certificate"},
		&cli.BoolFlag{Name: "insecure-skip-tls-verify", Usage: "TLS without verifying the server's certificate (unsafe)"},
	}
}

// curatorTLSFlags are the client TLS flags only the Curator has.
func curatorTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "tls", Usage: "TLS with no file given: verify servers with the system's CAs"},
		&cli.StringFlag{
			Name:        "metroctl-config",
			EnvVars:     []string{"NODEWATCH_METROCTL_CONFIG"},
			Usage:       "metroctl's owner credentials in `DIR` (owner.pem, owner-key.pem, ca.pem); '' for none",
			DefaultText: "$XDG_CONFIG_HOME/metroctl if it has owner-key.pem, with no other TLS flag",
			TakesFile:   true,
		},
	}
}

// clientTLS is the client side of TLS as the flags ask for it (dial
// secures and explains the connections with it), and where it came from.
type clientTLS struct {
	dial.TLS
	// metroctlDefault is metroctl's directory when its credentials were
	// used because they exist, not because a flag named them.
	metroctlDefault string
}

// etcdFlagNames are the flags dial names when it explains a failed
// connection to etcd.
func etcdFlagNames() dial.Flags {
	return dial.Flags{TLS: "--cacert FILE or an https:// endpoint", Roots: "--cacert FILE",
		Client: "--cert FILE and --key FILE", ServerName: "--tls-server-name NAME"}
}

// curatorFlagNames are the flags dial names when it explains a failed
// connection to the Curator.
func curatorFlagNames() dial.Flags {
	return dial.Flags{
		TLS:        "--cacert FILE, --metroctl-config DIR or --tls",
		Roots:      "--cacert FILE or --metroctl-config DIR",
		Client:     "--cert/--key or --metroctl-config DIR",
		ServerName: "--tls-server-name NAME",
		ChainOnly:  "a Metropolis node's certificate names no address: give the cluster CA with --cacert FILE or --metroctl-config DIR, which check the chain only",
	}
}

// parseClientTLS reads the TLS flags; curatorSide adds those only the
// Curator has (--tls, --metroctl-config).
func parseClientTLS(c *cli.Context, e Env, curatorSide bool) (*clientTLS, error) {
	ca, cert, key, name := c.String("cacert"), c.String("cert"), c.String("key"), c.String("tls-server-name")
	skipVerify := c.Bool("insecure-skip-tls-verify")
	ct := &clientTLS{TLS: dial.TLS{Flags: etcdFlagNames()}}
	wantTLS, metroctl := false, ""
	if curatorSide {
		ct.Flags = curatorFlagNames()
		wantTLS = c.Bool("tls")
		if c.IsSet("metroctl-config") {
			metroctl = c.String("metroctl-config")
		} else if ca == "" && cert == "" && key == "" && name == "" && !skipVerify && !wantTLS {
			metroctl = curator.DefaultMetroctlDir(e.Getenv)
			ct.metroctlDefault = metroctl
		}
	}
	switch {
	case (cert == "") != (key == ""):
		return nil, cmdline.Usagef("--cert and --key go together")
	case metroctl != "" && cert != "":
		return nil, cmdline.Usagef("--metroctl-config %s and --cert/--key both give a client certificate: give one of them", metroctl)
	case skipVerify && ca != "":
		return nil, cmdline.Usagef("--insecure-skip-tls-verify and --cacert: the one turns off the check the other sets up; give one of them")
	case skipVerify && name != "":
		return nil, cmdline.Usagef("--insecure-skip-tls-verify and --tls-server-name: the one turns off the check the other sets up; give one of them")
	}
	if ca == "" && cert == "" && name == "" && metroctl == "" && !skipVerify && !wantTLS {
		return ct, nil
	}
	files := dial.ClientFiles{
		CA:   dial.File{Flag: "--cacert", Path: ca},
		Cert: dial.File{Flag: "--cert", Path: cert}, Key: dial.File{Flag: "--key", Path: key},
		ServerName: name, SkipVerify: skipVerify,
	}
	if err := files.Load(&ct.TLS); err != nil {
		return nil, cmdline.Usage(err)
	}
	if metroctl != "" {
		if err := curator.AddMetroctl(&ct.TLS, metroctl, ca == "" && !skipVerify); err != nil {
			return nil, ct.metroctlError(metroctl, err)
		}
	}
	if skipVerify {
		e.Logf("warning: --insecure-skip-tls-verify: the server's certificate is not checked; anyone on the way to it can pose as the server and read what it sends")
	}
	return ct, nil
}

// metroctlError names the flag, or the default, that made nodewatch read
// metroctl's credentials in dir, in err.
func (ct *clientTLS) metroctlError(dir string, err error) error {
	var missing *curator.MissingCAError
	if errors.As(err, &missing) {
		err = fmt.Errorf("%w (metroctl writes it when it first connects; or give the CA with --cacert FILE)", missing.Err)
	}
	if ct.metroctlDefault != "" {
		return cmdline.Usagef("metroctl's credentials (used because %s exists; --metroctl-config '' to connect without them): %v", filepath.Join(dir, curator.MetroctlOwnerKey), err)
	}
	return cmdline.Usagef("--metroctl-config: %v", err)
}
