//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit/certtest"
)

// TestNodesMutualTLS: serve with a server certificate named after a node
// id (no address in it) and required client certificates; nodes verifies
// the chain against the CA without a host-name check, as Metropolis
// clusters need. A client with a certificate from another CA, or none, is
// refused.
func TestNodesMutualTLS(t *testing.T) {
	t.Parallel()
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))

	cluster := certtest.NewCA(t, "cluster-ca", certtest.Ed25519PKCS8)
	srvCert, srvKey, _, _ := cluster.Issue(certtest.Spec{CN: "metropolis-" + idA, Use: certtest.Node})
	cliCert, cliKey, _, _ := cluster.Issue(certtest.Spec{CN: "operator"})
	caFile := cluster.File

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

	other := certtest.NewCA(t, "other-ca", certtest.Ed25519PKCS8)
	strangerCert, strangerKey, _, _ := other.Issue(certtest.Spec{CN: "stranger"})
	for name, args := range map[string][]string{
		"client certificate from another CA": {"--cacert", caFile, "--cert", strangerCert, "--key", strangerKey},
		"server not signed by the given CA":  {"--cacert", other.File, "--cert", cliCert, "--key", cliKey},
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
