package connflags

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/cmdline"
)

// usageMessage returns err's message if it is a usage error (exit 2),
// "" for nil, and says so otherwise.
func usageMessage(err error) string {
	var ce *cmdline.Error
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &ce) || ce.Code != cmdline.ExitUsage:
		return "not a usage error: " + err.Error()
	}
	return err.Error()
}

func TestEtcdEndpoint(t *testing.T) {
	const forms = ": want HOST:PORT, http://HOST:PORT or https://HOST:PORT"
	for _, tc := range []struct{ ep, err string }{
		// Valid: what the reference and etcd's client take.
		{"127.0.0.1:2379", ""},
		{"etcd-0.example.net:2379", ""},
		{"http://127.0.0.1:2379", ""},
		{"https://etcd-0:2379", ""},
		{"https://etcd-0:2379/", ""},
		{"[::1]:2379", ""},
		{"http://[fe80::1%eth0]:2379", ""},
		{"unix:/run/etcd.sock", ""},
		{"unix:///run/etcd.sock", ""},
		{"unixs://etcd.sock", ""},
		// No port, bad port.
		{"127.0.0.1", "--etcd 127.0.0.1: no port" + forms},
		{"http://etcd", "--etcd http://etcd: no port" + forms},
		{"[::1]", "--etcd [::1]: no port" + forms},
		{"127.0.0.1:", "--etcd 127.0.0.1:: no port" + forms},
		{"http://127.0.0.1:37047x", `--etcd http://127.0.0.1:37047x: bad port "37047x" (want 1 to 65535)` + forms},
		{"127.0.0.1:0", `--etcd 127.0.0.1:0: bad port "0" (want 1 to 65535)` + forms},
		{"127.0.0.1:65536", `--etcd 127.0.0.1:65536: bad port "65536" (want 1 to 65535)` + forms},
		// Bad scheme, path, user.
		{"ftp://127.0.0.1:2379", `--etcd ftp://127.0.0.1:2379: unknown scheme "ftp"` + forms},
		{"htp://127.0.0.1:2379", `--etcd htp://127.0.0.1:2379: unknown scheme "htp"` + forms},
		{"http://127.0.0.1:2379/v3", "--etcd http://127.0.0.1:2379/v3: not an endpoint (a path or a query?)" + forms},
		{"127.0.0.1:2379/", "--etcd 127.0.0.1:2379/: not an endpoint (a path or a query?)" + forms},
		{"http://root:secret@127.0.0.1:2379", "--etcd: an endpoint names a user: give it with --user NAME[:PASSWORD], and the endpoint as HOST:PORT, http://HOST:PORT or https://HOST:PORT"},
		{"unix:", "--etcd unix:: no port" + forms},
		// Bad hosts and IPv6 literals.
		{"::1:2379", "--etcd ::1:2379: an IPv6 address goes in brackets, with its port: [::1:2379]:PORT"},
		{"127.0.0.1:2379:1", "--etcd 127.0.0.1:2379:1: too many colons" + forms + " (an IPv6 address in brackets, [::1]:2379)"},
		{"[::1:2379", `--etcd [::1:2379: bad IPv6 address in "[::1:2379"` + forms + ", an IPv6 address in brackets ([::1]:2379)"},
		{"[::g]:2379", `--etcd [::g]:2379: bad IPv6 address "::g"` + forms},
		{":2379", "--etcd :2379: no host" + forms},
		{"300.0.0.1:2379", `--etcd 300.0.0.1:2379: bad IPv4 address "300.0.0.1"` + forms},
		{"etcd 0:2379", `--etcd etcd 0:2379: bad host "etcd 0"` + forms},
	} {
		if diff := cmp.Diff(tc.err, usageMessage(etcdEndpoint(tc.ep))); diff != "" {
			t.Errorf("--etcd %s (-want +got):\n%s", tc.ep, diff)
		}
	}
}

func TestCuratorEndpoint(t *testing.T) {
	const forms = ": want HOST:PORT (or HOST alone for port 7835)"
	for _, tc := range []struct{ ep, want, err string }{
		{"127.0.0.1:7835", "127.0.0.1:7835", ""},
		{"curator.example.net:443", "curator.example.net:443", ""},
		{"[::1]:7835", "[::1]:7835", ""},
		{"unix:/run/curator.sock", "unix:/run/curator.sock", ""},
		// A host alone gets the Curator's port (the reference: "The
		// Curator's default port is 7835").
		{"127.0.0.1", "127.0.0.1:7835", ""},
		{"metropolis-node-1", "metropolis-node-1:7835", ""},
		{"[::1]", "[::1]:7835", ""},
		{"http://127.0.0.1:1", "", "--curator http://127.0.0.1:1: want HOST:PORT, a gRPC address without a scheme"},
		{"https://curator.example.net:7835", "", "--curator https://curator.example.net:7835: want HOST:PORT, a gRPC address without a scheme, with --tls (or --cacert FILE) for TLS"},
		{"dns:///curator:7835", "", "--curator dns:///curator:7835: want HOST:PORT, a gRPC address without a scheme"},
		{"127.0.0.1:x", "", `--curator 127.0.0.1:x: bad port "x" (want 1 to 65535)` + forms},
		{"127.0.0.1:", "", "--curator 127.0.0.1:: no port" + forms},
		{"curator:7835/", "", "--curator curator:7835/: not an endpoint" + forms},
		{"::1", "", "--curator ::1: an IPv6 address goes in brackets, with its port: [::1]:PORT"},
		{"[::1", "", `--curator [::1: bad IPv6 address in "[::1"` + forms + ", an IPv6 address in brackets ([::1]:2379)"},
		{"[nope]", "", `--curator [nope]: "nope" in brackets is not an IPv6 address` + forms},
	} {
		got, err := curatorEndpoint(tc.ep)
		if diff := cmp.Diff(tc.err, usageMessage(err)); diff != "" {
			t.Errorf("--curator %s (-want +got):\n%s", tc.ep, diff)
		}
		if got != tc.want {
			t.Errorf("--curator %s = %q, want %q", tc.ep, got, tc.want)
		}
	}
}
