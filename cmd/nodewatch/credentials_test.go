//go:build unix

package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit/certtest"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// metroctlDir writes metroctl's configuration directory for an owner of
// the cluster whose CA is ca: owner.pem, owner-key.pem in metroctl's own
// PEM type (the raw Ed25519 key), and clusterCA as ca.pem. It returns the
// directory.
func metroctlDir(t *testing.T, ca *certtest.CA, clusterCA *certtest.CA) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "metroctl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	certFile, _, _, key := ca.Issue(certtest.Spec{CN: "owner", Key: certtest.Ed25519PKCS8})
	cert, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pem"), cert, 0o644); err != nil {
		t.Fatal(err)
	}
	certtest.WritePEM(t, filepath.Join(dir, "owner-key.pem"), "METROPOLIS INITIAL OWNER PRIVATE KEY", key.(ed25519.PrivateKey))
	ca2, err := os.ReadFile(clusterCA.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca2, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startTLSServe runs serve with mTLS: a server certificate of cluster's
// named after a node id, with no address in it (as Metropolis issues
// them), and client certificates required to be cluster's too. It
// returns the address to dial.
func startTLSServe(t *testing.T, cluster *certtest.CA) string {
	t.Helper()
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	srvCert, srvKey, _, _ := cluster.Issue(certtest.Spec{CN: "metropolis-" + idA, Key: certtest.Ed25519PKCS8, Use: certtest.Node})
	p := start(t, "serve", "--etcd", ep, "--listen", "127.0.0.1:0",
		"--listen-cert", srvCert, "--listen-key", srvKey, "--listen-cacert", cluster.File)
	waitServing(t, p)
	const says = "serving Curator Watch on "
	s := p.stderr.String()
	return strings.FieldsFunc(s[strings.Index(s, says)+len(says):], func(r rune) bool { return r == ' ' || r == '"' })[0]
}

// TestNodesMetroctl: nodes connects over mTLS to serve as the cluster
// owner, with metroctl's credentials: named by --metroctl-config, or
// found where metroctl keeps them ($XDG_CONFIG_HOME/metroctl,
// ~/.config/metroctl). The server is verified against the cluster CA in
// ca.pem without a host-name check; a ca.pem of another cluster, and an
// owner of another cluster, are refused; --metroctl-config ” and any
// other TLS flag turn the default off.
func TestNodesMetroctl(t *testing.T) {
	t.Parallel()
	cluster := certtest.NewCA(t, "cluster-ca", certtest.Ed25519PKCS8)
	other := certtest.NewCA(t, "other-cluster-ca", certtest.Ed25519PKCS8)
	addr := startTLSServe(t, cluster)
	dir := metroctlDir(t, cluster, cluster)
	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, ".config", "metroctl"), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	strangeCA := metroctlDir(t, cluster, other)
	strangeOwner := metroctlDir(t, other, cluster)

	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		code int
		want []string // in stderr
	}{
		{name: "--metroctl-config", args: []string{"--metroctl-config", dir}},
		{name: "--metroctl-config --health (GetNodes over the same mTLS)", args: []string{"--metroctl-config", dir, "--health"}},
		{name: "XDG_CONFIG_HOME", vars: map[string]string{"XDG_CONFIG_HOME": filepath.Dir(dir)}},
		{name: "HOME", vars: map[string]string{"HOME": home}},
		{name: "--metroctl-config '' turns the default off", vars: map[string]string{"HOME": home}, args: []string{"--metroctl-config", ""},
			code: exitUnavailable, want: []string{"the server closed the connection before answering: if it serves TLS, give --cacert FILE, --metroctl-config DIR or --tls"}},
		{name: "another flag turns the default off", vars: map[string]string{"HOME": home}, args: []string{"--tls"},
			code: exitUnavailable, want: []string{"the server's certificate (CN=metropolis-" + idA + ", issued by CN=cluster-ca) is not for 127.0.0.1 (x509: ",
				"--tls-server-name NAME expects another name; a Metropolis node's certificate names no address: give the cluster CA with --cacert FILE or --metroctl-config DIR, which check the chain only"}},
		{name: "the CA of another cluster", args: []string{"--metroctl-config", strangeCA},
			code: exitUnavailable, want: []string{"the server's certificate (CN=metropolis-" + idA + ", issued by CN=cluster-ca) is not signed by the cluster CA in " + filepath.Join(strangeCA, "ca.pem")}},
		{name: "the owner of another cluster", args: []string{"--metroctl-config", strangeOwner},
			code: exitUnavailable, want: []string{"the server requires a client certificate signed by a CA it trusts, and the owner certificate in " + filepath.Join(strangeOwner, "owner.pem") + " is not"}},
		{name: "found by default, refused", vars: map[string]string{"XDG_CONFIG_HOME": filepath.Dir(strangeCA)},
			code: exitUnavailable, want: []string{"is not signed by the cluster CA in", "with metroctl's credentials in " + strangeCA + ", used because they exist; --metroctl-config '' to connect without them"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"nodes", "--curator", addr, "--once", "--dial-timeout", "3s"}, tc.args...)
			out, errOut, code := runSyncEnv(t, tc.vars, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, out, errOut)
			}
			if code == 0 && !strings.Contains(out, idA) {
				t.Fatalf("node %s not in stdout %q", idA, out)
			}
			if code == 0 && slices.Contains(tc.args, "--health") && !strings.Contains(out, `"health":"HEALTH_UNKNOWN"`) {
				t.Fatalf("no health in stdout %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestMetroctlFiles: a metroctl directory that cannot be used is exit 2,
// before connecting, with a message naming the file and what is wrong.
func TestMetroctlFiles(t *testing.T) {
	t.Parallel()
	cluster := certtest.NewCA(t, "cluster-ca", certtest.Ed25519PKCS8)
	// broken returns a fresh metroctl directory, changed by change.
	broken := func(change func(dir string)) string {
		dir := metroctlDir(t, cluster, cluster)
		change(dir)
		return dir
	}
	remove := func(file string) func(string) string {
		return func(dir string) string {
			if err := os.Remove(filepath.Join(dir, file)); err != nil {
				t.Fatal(err)
			}
			return dir
		}
	}
	write := func(file, typ string, der []byte) func(string) {
		return func(dir string) { certtest.WritePEM(t, filepath.Join(dir, file), typ, der) }
	}
	_, pkcs8File, _, _ := cluster.Issue(certtest.Spec{CN: "pkcs8", Key: certtest.Ed25519PKCS8})
	pkcs8, _ := os.ReadFile(pkcs8File)
	_, anotherKey, _ := ed25519.GenerateKey(rand.Reader)
	expired, _, _, _ := cluster.Issue(certtest.Spec{CN: "old", Key: certtest.Ed25519PKCS8, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	expiredOwner := broken(func(dir string) {
		pem, _ := os.ReadFile(expired)
		os.WriteFile(filepath.Join(dir, "owner.pem"), pem, 0o644)
		// and its key: the old certificate's key is in old.key, PKCS#8
		k, _ := os.ReadFile(filepath.Join(cluster.Dir, "old.key"))
		block, _ := pemDecode(k)
		key, err := x509.ParsePKCS8PrivateKey(block)
		if err != nil {
			t.Fatal(err)
		}
		certtest.WritePEM(t, filepath.Join(dir, "owner-key.pem"), "METROPOLIS INITIAL OWNER PRIVATE KEY", key.(ed25519.PrivateKey))
	})

	for _, tc := range []struct {
		name string
		dir  string
		want string
	}{
		{"no owner-key.pem", broken(func(d string) { remove("owner-key.pem")(d) }), "owner-key.pem: no such file or directory"},
		{"owner-key.pem of PKCS#8", broken(func(d string) { os.WriteFile(filepath.Join(d, "owner-key.pem"), pkcs8, 0o600) }),
			`owner-key.pem: a PEM block of type "PRIVATE KEY", want "METROPOLIS INITIAL OWNER PRIVATE KEY"`},
		{"owner-key.pem too short", broken(write("owner-key.pem", "METROPOLIS INITIAL OWNER PRIVATE KEY", make([]byte, 32))),
			"owner-key.pem: the key is 32 bytes long, want 64 (a raw Ed25519 private key)"},
		{"owner-key.pem not PEM", broken(func(d string) { os.WriteFile(filepath.Join(d, "owner-key.pem"), []byte("hello"), 0o600) }),
			"owner-key.pem: no PEM data in it"},
		{"another owner's key", broken(write("owner-key.pem", "METROPOLIS INITIAL OWNER PRIVATE KEY", anotherKey)),
			"owner-key.pem is not the key of the certificate in "},
		{"no owner.pem", broken(func(d string) { remove("owner.pem")(d) }), "owner.pem: no such file or directory (metroctl takeownership writes it)"},
		{"owner.pem a key", broken(write("owner.pem", "PRIVATE KEY", []byte{1})), `owner.pem: a PEM block of type "PRIVATE KEY", want "CERTIFICATE"`},
		{"owner.pem expired", expiredOwner, "owner.pem: the certificate expired at "},
		{"no ca.pem", broken(func(d string) { remove("ca.pem")(d) }),
			"ca.pem: no such file or directory (metroctl writes it when it first connects; or give the CA with --cacert FILE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runSync(t, "nodes", "--curator", "127.0.0.1:1", "--once", "--metroctl-config", tc.dir)
			if code != exitUsage || !strings.Contains(errOut, "--metroctl-config: ") || !strings.Contains(errOut, tc.dir) || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming --metroctl-config, %s and %q", code, errOut, tc.dir, tc.want)
			}
		})
	}

	t.Run("found by default", func(t *testing.T) {
		dir := broken(func(d string) { remove("owner.pem")(d) })
		_, errOut, code := runSyncEnv(t, map[string]string{"XDG_CONFIG_HOME": filepath.Dir(dir)}, "nodes", "--curator", "127.0.0.1:1", "--once")
		want := "metroctl's credentials (used because " + filepath.Join(dir, "owner-key.pem") + " exists; --metroctl-config '' to connect without them): "
		if code != exitUsage || !strings.Contains(errOut, want) || !strings.Contains(errOut, "owner.pem: no such file") {
			t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
		}
	})
	t.Run("not without owner-key.pem", func(t *testing.T) {
		dir := broken(func(d string) { remove("owner-key.pem")(d) })
		_, errOut, code := runSyncEnv(t, map[string]string{"XDG_CONFIG_HOME": filepath.Dir(dir)}, "nodes", "--curator", "127.0.0.1:1", "--once", "--dial-timeout", "100ms")
		if code != exitUnavailable || strings.Contains(errOut, "metroctl") {
			t.Fatalf("exit %d, stderr %q; want 3 (plaintext, not metroctl's)", code, errOut)
		}
	})
}

// pemDecode returns the bytes of the first PEM block in data.
func pemDecode(data []byte) ([]byte, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, os.ErrInvalid
	}
	return b.Bytes, nil
}

// TestClientKeyKinds: --cert/--key take ECDSA keys (PKCS#8 and SEC 1 "EC
// PRIVATE KEY") and Ed25519 keys (PKCS#8), to the Curator (serve with
// mTLS) and to etcd (with mTLS).
func TestClientKeyKinds(t *testing.T) {
	t.Parallel()
	cluster := certtest.NewCA(t, "cluster-ca", certtest.ECDSAPKCS8)
	curatorAddr := startTLSServe(t, cluster)
	srvCert, srvKey, _, _ := cluster.Issue(certtest.Spec{CN: "etcd", Key: certtest.ECDSASEC1, Use: certtest.Server})
	etcdEP := etcdtest.StartTLS(t, embedetcd.TLS{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: cluster.File})
	for _, tc := range []struct {
		name string
		kind certtest.KeyKind
		pem  string // the key file's PEM type
	}{
		{"ECDSA PKCS#8", certtest.ECDSAPKCS8, "-----BEGIN PRIVATE KEY-----"},
		{"ECDSA SEC 1", certtest.ECDSASEC1, "-----BEGIN EC PRIVATE KEY-----"},
		{"Ed25519 PKCS#8", certtest.Ed25519PKCS8, "-----BEGIN PRIVATE KEY-----"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certFile, keyFile, _, _ := cluster.Issue(certtest.Spec{CN: "operator-" + strings.ReplaceAll(tc.name, " ", "-"), Key: tc.kind})
			if k, _ := os.ReadFile(keyFile); !strings.HasPrefix(string(k), tc.pem) {
				t.Fatalf("key file starts %.40q, want %s", k, tc.pem)
			}
			tlsArgs := []string{"--cacert", cluster.File, "--cert", certFile, "--key", keyFile}
			out, errOut, code := runSync(t, append([]string{"nodes", "--curator", curatorAddr, "--once"}, tlsArgs...)...)
			if code != 0 || !strings.Contains(out, idA) {
				t.Errorf("nodes: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			out, errOut, code = runSync(t, append([]string{"key", "--etcd", etcdEP, "--once", "/x"}, tlsArgs...)...)
			if code != 0 || !strings.Contains(out, "batch_done") {
				t.Errorf("key: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			// A name the certificate has, not the endpoint's address.
			out, errOut, code = runSync(t, append([]string{"key", "--etcd", etcdEP, "--once", "/x", "--tls-server-name", "localhost"}, tlsArgs...)...)
			if code != 0 || !strings.Contains(out, "batch_done") {
				t.Errorf("key --tls-server-name localhost: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}

// tlsCurator serves a Curator (one node, as slowCurator does) with TLS,
// with the certificate of ca's that spec says; it returns its address.
// (serve checks its certificate; this one serves an expired one too.)
func tlsCurator(t *testing.T, ca *certtest.CA, spec certtest.Spec) string {
	t.Helper()
	certFile, keyFile, _, _ := ca.Issue(spec)
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp}})))
	apipb.RegisterCuratorServer(srv, &slowCurator{nodes: 1})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// TestTLSFailures: each way TLS can fail ends the run within
// --dial-timeout (exit 3), or before connecting (exit 2), with a message
// that names the cause: the file, the certificate, the flag to give.
func TestTLSFailures(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "cluster-ca", certtest.ECDSAPKCS8)
	other := certtest.NewCA(t, "other-ca", certtest.Ed25519PKCS8)
	curatorAddr := startTLSServe(t, ca)
	srvCert, srvKey, _, _ := ca.Issue(certtest.Spec{CN: "etcd", Use: certtest.Server})
	etcdEP := etcdtest.StartTLS(t, embedetcd.TLS{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.File})
	etcdAddr := strings.TrimPrefix(etcdEP, "https://")
	expiredAddr := tlsCurator(t, ca, certtest.Spec{CN: "expired-server", Use: certtest.Server, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	loopbackAddr := tlsCurator(t, ca, certtest.Spec{CN: "loopback-server", Use: certtest.Server})
	plainAddr := startSlowCurator(t, 1, time.Millisecond)

	cert, key, _, _ := ca.Issue(certtest.Spec{CN: "operator"})
	strangerCert, strangerKey, _, _ := other.Issue(certtest.Spec{CN: "stranger"})
	oldCert, oldKey, oldX509, _ := ca.Issue(certtest.Spec{CN: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	newCert, newKey, newX509, _ := ca.Issue(certtest.Spec{CN: "early", NotBefore: time.Now().Add(24 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	mine := []string{"--cert", cert, "--key", key}
	nodeCert := "(CN=metropolis-" + idA + ", issued by CN=cluster-ca)"

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		// The Curator.
		{"nodes: server not signed by --cacert", append([]string{"nodes", "--curator", curatorAddr, "--cacert", other.File}, mine...), exitUnavailable,
			[]string{"the server's certificate " + nodeCert + " is not signed by the CA in " + other.File}},
		{"nodes: system roots", []string{"nodes", "--curator", loopbackAddr, "--tls"}, exitUnavailable,
			[]string{"the server's certificate (CN=loopback-server, issued by CN=cluster-ca) is not signed by a CA this system trusts: give the server's CA with --cacert FILE or --metroctl-config DIR"}},
		{"nodes: no client certificate", []string{"nodes", "--curator", curatorAddr, "--cacert", ca.File}, exitUnavailable,
			[]string{"the server requires a client certificate (", "): give --cert/--key or --metroctl-config DIR"}},
		{"nodes: client certificate of another CA", []string{"nodes", "--curator", curatorAddr, "--cacert", ca.File, "--cert", strangerCert, "--key", strangerKey}, exitUnavailable,
			[]string{"the server requires a client certificate signed by a CA it trusts, and the certificate in " + strangerCert + " is not"}},
		{"nodes: server certificate expired", []string{"nodes", "--curator", expiredAddr, "--cacert", ca.File}, exitUnavailable,
			[]string{"the server's certificate (CN=expired-server, issued by CN=cluster-ca) expired at "}},
		{"nodes: plaintext to TLS", []string{"nodes", "--curator", curatorAddr}, exitUnavailable,
			[]string{"the server closed the connection before answering: if it serves TLS, give --cacert FILE, --metroctl-config DIR or --tls"}},
		{"nodes: --tls to a plaintext server", []string{"nodes", "--curator", plainAddr, "--tls"}, exitUnavailable,
			[]string{"the server does not speak TLS (tls: first record does not look like a TLS handshake): if it serves plaintext, drop the TLS flags; else check the address"}},
		{"nodes: client certificate expired", []string{"nodes", "--curator", curatorAddr, "--cacert", ca.File, "--cert", oldCert, "--key", oldKey}, exitUsage,
			[]string{"--cert " + oldCert + ": the certificate expired at " + oldX509.NotAfter.UTC().Format(time.RFC3339)}},
		{"nodes: client certificate not yet valid", []string{"nodes", "--curator", curatorAddr, "--cacert", ca.File, "--cert", newCert, "--key", newKey}, exitUsage,
			[]string{"--cert " + newCert + ": the certificate is not valid before " + newX509.NotBefore.UTC().Format(time.RFC3339)}},
		{"nodes: key of another certificate", []string{"nodes", "--curator", curatorAddr, "--cacert", ca.File, "--cert", cert, "--key", strangerKey}, exitUsage,
			[]string{"--cert " + cert + " and --key " + strangerKey + " do not belong together: the key is not the certificate's"}},
		{"nodes: a certificate for a key", []string{"nodes", "--curator", curatorAddr, "--cert", key, "--key", key}, exitUsage,
			[]string{"--cert " + key + ": no PEM certificate in it"}},

		// etcd.
		{"key: server not signed by --cacert", append([]string{"key", "--etcd", etcdAddr, "/x", "--cacert", other.File}, mine...), exitUnavailable,
			[]string{"the certificate of " + etcdAddr + " (CN=etcd, issued by CN=cluster-ca) is not signed by the CA in " + other.File}},
		{"key: https:// with the system roots", []string{"key", "--etcd", etcdEP, "/x"}, exitUnavailable,
			[]string{"the certificate of " + etcdAddr + " (CN=etcd, issued by CN=cluster-ca) is not signed by a CA this system trusts: give the server's CA with --cacert FILE"}},
		{"key: no client certificate", []string{"key", "--etcd", etcdEP, "/x", "--cacert", ca.File}, exitUnavailable,
			[]string{etcdAddr + " requires a client certificate (", "): give --cert FILE and --key FILE"}},
		{"key: client certificate of another CA", []string{"key", "--etcd", etcdEP, "/x", "--cacert", ca.File, "--cert", strangerCert, "--key", strangerKey}, exitUnavailable,
			[]string{etcdAddr + " requires a client certificate signed by a CA it trusts, and the certificate in " + strangerCert + " is not"}},
		{"key: server not the host name", append([]string{"key", "--etcd", etcdEP, "/x", "--cacert", ca.File, "--tls-server-name", "etcd.example"}, mine...), exitUnavailable,
			[]string{"(CN=etcd, issued by CN=cluster-ca) is not for etcd.example (x509: certificate is valid for localhost, not etcd.example): --tls-server-name NAME expects another name"}},
		{"key: plaintext to TLS", []string{"key", "--etcd", etcdAddr, "/x"}, exitUnavailable,
			[]string{etcdAddr + " closed the connection before answering: if it serves TLS, give --cacert FILE or an https:// endpoint"}},
		{"key: client certificate expired", []string{"key", "--etcd", etcdEP, "/x", "--cacert", ca.File, "--cert", oldCert, "--key", oldKey}, exitUsage,
			[]string{"--cert " + oldCert + ": the certificate expired at "}},
		{"key: key of another certificate", []string{"key", "--etcd", etcdEP, "/x", "--cacert", ca.File, "--cert", cert, "--key", strangerKey}, exitUsage,
			[]string{"--cert " + cert + " and --key " + strangerKey + " do not belong together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// 3s: long enough for a handshake on a loaded machine, so
			// that the last error is the handshake's.
			args := append(tc.args, "--once", "--dial-timeout", "3s")
			began := time.Now()
			out, errOut, code := runSync(t, args...)
			took := time.Since(began)
			if code != tc.code || out != "" {
				t.Fatalf("exit %d after %v, want %d; stdout %q, stderr %q", code, took, tc.code, out, errOut)
			}
			last := errOut[strings.LastIndex(strings.TrimSuffix(errOut, "\n"), "\n")+1:] // the final message
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("the message lacks %q:\n%s", w, last)
				}
			}
			if code == exitUnavailable && !strings.Contains(last, "within 3s") {
				t.Errorf("the message does not say that it gave up after --dial-timeout:\n%s", last)
			}
			t.Logf("after %v: %s", took.Round(time.Millisecond), last)
		})
	}
}

// TestInsecureSkipVerify: --insecure-skip-tls-verify connects without
// checking the server's certificate (still with a client certificate),
// and warns about it on stderr.
func TestInsecureSkipVerify(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "cluster-ca", certtest.ECDSAPKCS8)
	curatorAddr := startTLSServe(t, ca)
	srvCert, srvKey, _, _ := ca.Issue(certtest.Spec{CN: "etcd", Use: certtest.Server})
	etcdEP := etcdtest.StartTLS(t, embedetcd.TLS{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.File})
	cert, key, _, _ := ca.Issue(certtest.Spec{CN: "operator"})
	const warning = "nodewatch: warning: --insecure-skip-tls-verify: the server's certificate is not checked; anyone on the way to it can pose as the server"
	for _, args := range [][]string{
		{"nodes", "--curator", curatorAddr},
		{"key", "--etcd", etcdEP, "/x"},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, errOut, code := runSync(t, append(args, "--once", "--insecure-skip-tls-verify", "--cert", cert, "--key", key)...)
			if code != 0 || !strings.Contains(out, "batch_done") || !strings.HasPrefix(errOut, warning) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the warning", code, out, errOut)
			}
		})
	}
}
