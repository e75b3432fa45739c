//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/certtest"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestServeFlagErrors: unusable TLS files are usage errors (exit 2) that
// name the flag, the file and what is wrong, before serve connects to
// anything. (What needs no generated certificate, with the bad limits, is
// in testdata/cli: usage-serve.txtar, tls.txtar.)
func TestServeFlagErrors(t *testing.T) {
	t.Parallel()
	p := certtest.NewCA(t, "ca", certtest.Ed25519PKCS8)
	cert, key, _, _ := p.Issue(certtest.Spec{CN: "srv", Use: certtest.Server})
	_, otherKey, _, _ := p.Issue(certtest.Spec{CN: "other", Use: certtest.Server})
	missing := filepath.Join(p.Dir, "missing.pem")
	garbage := filepath.Join(p.Dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(p.Dir, "unreadable.key")
	if err := os.WriteFile(unreadable, nil, 0o000); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"key and certificate swapped", []string{"--listen-cert", key, "--listen-key", cert}, "--listen-cert " + key + ": no PEM certificate in it"},
		{"missing key", []string{"--listen-cert", cert, "--listen-key", missing}, "--listen-key " + missing + ": no such file or directory"},
		{"key not PEM", []string{"--listen-cert", cert, "--listen-key", garbage}, "--listen-key " + garbage + ": no PEM private key in it"},
		{"key of another certificate", []string{"--listen-cert", cert, "--listen-key", otherKey}, "--listen-cert " + cert + " and --listen-key " + otherKey + " do not belong together: the key is not the certificate's"},
		{"missing client CA", []string{"--listen-cert", cert, "--listen-key", key, "--listen-cacert", missing}, "--listen-cacert " + missing + ": no such file or directory"},
		{"client CA not PEM", []string{"--listen-cert", cert, "--listen-key", key, "--listen-cacert", garbage}, "--listen-cacert " + garbage + ": no PEM certificate in it"},
		{"client CA is a key", []string{"--listen-cert", cert, "--listen-key", key, "--listen-cacert", key}, "--listen-cacert " + key + ": no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// etcd is never reached: the flags are checked first.
			args := append([]string{"serve", "--etcd", "http://127.0.0.1:1"}, tc.args...)
			stdout, stderr, code := runSync(t, args...)
			if code != exitUsage || stdout != "" || stderr != "nodewatch: "+tc.want+"\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if os.Geteuid() != 0 { // root reads any file
		_, stderr, code := runSync(t, "serve", "--etcd", "http://127.0.0.1:1", "--listen-cert", cert, "--listen-key", unreadable)
		if want := "--listen-key " + unreadable + ": permission denied"; code != exitUsage || !strings.Contains(stderr, want) {
			t.Fatalf("unreadable key: exit %d, stderr %q; want 2 and %q", code, stderr, want)
		}
	}
}

// TestServeStreamLimits: --max-streams and --max-streams-per-conn reach
// the server. Past --max-streams a Watch fails at once with
// ResourceExhausted and the open streams go on; once one ends, a new one
// is accepted. Past --max-streams-per-conn a gRPC client's stream waits.
func TestServeStreamLimits(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))

	t.Run("--max-streams", func(t *testing.T) {
		t.Parallel()
		_, addr := startServe(t, nil, "--etcd", ep, "--max-streams", "2")
		conn := dialPlain(t, addr)
		w1 := openWatch(t, conn)
		w2 := openWatch(t, dialPlain(t, addr))
		if w := openWatch(t, conn); status.Code(w.err) != codes.ResourceExhausted || !strings.Contains(w.err.Error(), "limit of 2 open streams") {
			t.Fatalf("third stream: %v; want ResourceExhausted naming the limit of 2", w.err)
		}
		putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
		w1.wantNode(t, idB)
		w2.wantNode(t, idB)

		// The stream counts until its handler returns, shortly after the
		// client cancelled it.
		w1.cancel()
		testkit.Eventually(t, func() error {
			w := openWatch(t, conn)
			if w.err != nil && status.Code(w.err) != codes.ResourceExhausted {
				t.Fatalf("stream after one ended: %v", w.err)
			}
			return w.err
		})
	})
	t.Run("--max-streams-per-conn", func(t *testing.T) {
		t.Parallel()
		_, addr := startServe(t, nil, "--etcd", ep, "--max-streams-per-conn", "1")
		conn := dialPlain(t, addr)
		w1 := openWatch(t, conn)
		queued := make(chan *watchStream, 1)
		go func() { queued <- openWatch(t, conn) }()
		select {
		case w := <-queued:
			t.Fatalf("second stream on the connection did not wait: %v", w.err)
		case <-time.After(quiet):
		}
		w1.cancel()
		select {
		case w := <-queued:
			if w.err != nil {
				t.Fatalf("queued stream: %v", w.err)
			}
		case <-time.After(timeout):
			t.Fatalf("queued stream not served within %v of the first ending", timeout)
		}
	})
}

// TestServeReloadCertificate: on a reload request (SIGHUP, sent here
// in-process) serve reads its certificate, key and client CAs again. New
// connections see the new certificate; a stream opened before goes on
// receiving changes on its connection; unusable files are logged and the
// certificate kept.
func TestServeReloadCertificate(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	r := newRotation(t)
	cluster, caFile, certFile, keyFile, client := r.cluster, r.caFile, r.certFile, r.keyFile, r.client
	clientCAFile := filepath.Join(filepath.Dir(certFile), "clients.pem")
	install(t, caFile, clientCAFile)

	hup := make(chan os.Signal, 1)
	reloads := func(e *env) {
		e.reloads = func() (<-chan os.Signal, func()) { return hup, func() {} }
	}
	p, addr := startServe(t, reloads, "--etcd", ep, "--listen-cert", certFile, "--listen-key", keyFile, "--listen-cacert", clientCAFile)

	old := openWatch(t, dialTLS(t, addr, client))
	if got := old.serverCN(); got != "server-v1" {
		t.Fatalf("server certificate %q, want server-v1", got)
	}

	_, v2Key := r.to(t, "server-v2")
	hup <- syscall.SIGHUP
	waitStderr(t, p, `msg="reloaded certificate" cert_file=`+certFile+" key_file="+keyFile+" client_ca_file="+clientCAFile+` subject="CN=server-v2" serial=`)
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
	old.wantNode(t, idB)
	if got := handshakeCN(t, addr, client); got != "server-v2" {
		t.Fatalf("after reload, a new connection sees %q, want server-v2", got)
	}
	if got := openWatch(t, dialTLS(t, addr, client)).serverCN(); got != "server-v2" {
		t.Fatalf("after reload, a new gRPC connection sees %q, want server-v2", got)
	}

	t.Run("unusable files keep the certificate", func(t *testing.T) {
		_, strayKey, _, _ := cluster.Issue(certtest.Spec{CN: "stray", Use: certtest.Server})
		install(t, strayKey, keyFile)
		hup <- syscall.SIGHUP
		waitStderr(t, p, `level=ERROR msg="reload failed, keeping the certificate" subject="CN=server-v2" serial=`,
			`error="--listen-cert `+certFile+" and --listen-key "+keyFile+` do not belong together: the key is not the certificate's"`)
		if got := handshakeCN(t, addr, client); got != "server-v2" {
			t.Fatalf("after a failed reload, a new connection sees %q, want server-v2", got)
		}
		install(t, v2Key, keyFile)
	})
	t.Run("client CAs", func(t *testing.T) {
		other := certtest.NewCA(t, "new-ca", certtest.Ed25519PKCS8)
		newCert, newKey, _, _ := other.Issue(certtest.Spec{CN: "new-operator"})
		newClient := operatorTLS(t, caFile, newCert, newKey)
		if w := openWatch(t, dialTLS(t, addr, newClient)); w.err == nil {
			t.Fatal("a client of a CA not trusted yet was served")
		}
		both, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		newCA, err := os.ReadFile(other.File)
		if err != nil {
			t.Fatal(err)
		}
		installBytes(t, append(both, newCA...), clientCAFile)
		hup <- syscall.SIGHUP
		waitLines(t, p, 2, `msg="reloaded certificate" cert_file=`+certFile)
		if w := openWatch(t, dialTLS(t, addr, newClient)); w.err != nil {
			t.Fatalf("a client of the CA added: %v", w.err)
		}
		if w := openWatch(t, dialTLS(t, addr, client)); w.err != nil {
			t.Fatalf("a client of the CA kept: %v", w.err)
		}
	})
}

// TestE2EServeReload: SIGHUP makes the serve process read its certificate
// again; a stream opened before goes on; a serve without TLS logs that it
// has nothing to reload and goes on too.
func TestE2EServeReload(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	r := newRotation(t)
	certFile, keyFile, client := r.certFile, r.keyFile, r.client

	sv := runServeCommand(t, serveCmd(t, "--etcd", ep, "--listen-cert", certFile, "--listen-key", keyFile, "--listen-cacert", r.caFile))
	old := openWatch(t, dialTLS(t, sv.addr, client))
	if got := old.serverCN(); got != "server-v1" {
		t.Fatalf("server certificate %q, want server-v1", got)
	}
	r.to(t, "server-v2")
	if err := syscall.Kill(sv.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, sv.stderr, sv.exited, 1, `msg="reloaded certificate" cert_file=`+certFile, "CN=server-v2")
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
	old.wantNode(t, idB)
	if got := handshakeCN(t, sv.addr, client); got != "server-v2" {
		t.Fatalf("after SIGHUP, a new connection sees %q, want server-v2", got)
	}
	stopServe(t, sv, exitOK)

	t.Run("plaintext", func(t *testing.T) {
		sv := runServeCommand(t, serveCmd(t, "--etcd", ep))
		if err := syscall.Kill(sv.cmd.Process.Pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLog(t, sv.stderr, sv.exited, 1, "reload requested: serving plaintext, nothing to reload")
		if w := openWatch(t, dialPlain(t, sv.addr)); w.err != nil {
			t.Fatalf("after SIGHUP: %v", w.err)
		}
		stopServe(t, sv, exitOK)
	})
	t.Run("other commands end", func(t *testing.T) {
		if signal.Ignored(syscall.SIGHUP) {
			t.Skip("SIGHUP is ignored in this process (nohup), and so in the commands it starts")
		}
		cmd := command(t, "key", "--etcd", ep, "--prefix", "/x/")
		lines, stderr := startLines(t, cmd)
		if l := <-lines; !strings.Contains(l, "batch_done") {
			t.Fatalf("initial batch: %q; stderr %q", l, stderr)
		}
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
			t.Fatalf("key after SIGHUP: %v, want killed by SIGHUP", cmd.ProcessState)
		}
	})
}

// startServe runs serve on a free loopback port, with set (if not nil)
// applied to its env, waits until it serves and returns the run and its
// address.
func startServe(t *testing.T, set func(*env), args ...string) (*proc, string) {
	t.Helper()
	addr, err := embedetcd.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startEnv(t, set, append([]string{"serve", "--listen", addr}, args...)...)
	waitServing(t, p)
	return p, addr
}

// waitStderr waits until a run has logged a line holding every one of subs.
func waitStderr(t *testing.T, p *proc, subs ...string) {
	t.Helper()
	waitLines(t, p, 1, subs...)
}

// waitLines waits until a run has logged n lines holding every one of subs.
func waitLines(t *testing.T, p *proc, n int, subs ...string) {
	t.Helper()
	waitLog(t, p.stderr, p.done, n, subs...)
}

// waitLog waits until stderr holds n lines holding every one of subs; the
// test fails if done is closed (nodewatch exited) first.
func waitLog(t *testing.T, stderr *testkit.Buffer, done <-chan struct{}, n int, subs ...string) {
	t.Helper()
	testkit.Eventually(t, func() error {
		found := 0
		for _, l := range strings.Split(stderr.String(), "\n") {
			if containsAll(l, subs) {
				found++
			}
		}
		if found >= n {
			return nil
		}
		select {
		case <-done:
			t.Fatalf("nodewatch exited: %s", stderr)
		default:
		}
		return fmt.Errorf("%d lines with %q, want %d; stderr:\n%s", found, subs, n, stderr)
	})
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// rotation is a server certificate in files that a test replaces, issued
// by a cluster CA, and an operator's TLS for that CA.
type rotation struct {
	cluster           *certtest.CA
	caFile            string // the cluster CA's certificate
	certFile, keyFile string // the server's
	client            *tls.Config
}

// newRotation issues the server certificate "server-v1" into files of a
// new directory.
func newRotation(t *testing.T) *rotation {
	t.Helper()
	cluster := certtest.NewCA(t, "cluster-ca", certtest.Ed25519PKCS8)
	dir := t.TempDir()
	r := &rotation{
		cluster:  cluster,
		caFile:   cluster.File,
		certFile: filepath.Join(dir, "srv.pem"),
		keyFile:  filepath.Join(dir, "srv.key"),
	}
	cliCert, cliKey, _, _ := cluster.Issue(certtest.Spec{CN: "operator"})
	r.client = operatorTLS(t, r.caFile, cliCert, cliKey)
	r.to(t, "server-v1")
	return r
}

// to installs a new server certificate for cn, as rotation tools do,
// and returns the files it was issued in.
func (r *rotation) to(t *testing.T, cn string) (cert, key string) {
	t.Helper()
	cert, key, _, _ = r.cluster.Issue(certtest.Spec{CN: cn, Use: certtest.Server})
	install(t, cert, r.certFile)
	install(t, key, r.keyFile)
	return cert, key
}

// install copies file src to dst the way rotation tools do: the new file
// is renamed over the old one.
func install(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	installBytes(t, b, dst)
}

func installBytes(t *testing.T, b []byte, dst string) {
	t.Helper()
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// operatorTLS is a client's TLS for the cluster CA in caFile, presenting
// cert and key, verifying the server's chain only (as nodes does).
func operatorTLS(t *testing.T, caFile, cert, key string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return dial.CuratorTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{kp}})
}

// handshakeCN connects to addr anew and returns the common name of the
// server's certificate.
func handshakeCN(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	return dialConn(t, addr, insecure.NewCredentials())
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	return dialConn(t, addr, credentials.NewTLS(cfg))
}

func dialConn(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// watchStream is a nodes_in_cluster Watch stream whose backlog has been read.
type watchStream struct {
	stream apipb.Curator_WatchClient
	cancel context.CancelFunc
	err    error // what the stream failed with before the end of its backlog
}

// openWatch opens a Watch stream on conn and reads its backlog.
func openWatch(t *testing.T, conn *grpc.ClientConn) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &watchStream{cancel: cancel}
	req := &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
	w.stream, w.err = apipb.NewCuratorClient(conn).Watch(ctx, req)
	for w.err == nil {
		var ev *apipb.WatchEvent
		if ev, w.err = w.recv(t); ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			break
		}
	}
	if w.err != nil {
		cancel()
	}
	return w
}

// recv receives the next event within timeout.
func (w *watchStream) recv(t *testing.T) (*apipb.WatchEvent, error) {
	t.Helper()
	type result struct {
		ev  *apipb.WatchEvent
		err error
	}
	c := make(chan result, 1)
	go func() {
		ev, err := w.stream.Recv()
		c <- result{ev, err}
	}()
	select {
	case r := <-c:
		return r.ev, r.err
	case <-time.After(timeout):
		w.cancel()
		t.Fatalf("no event within %v", timeout)
	}
	return nil, nil
}

// wantNode receives the next event, which must hold the node id.
func (w *watchStream) wantNode(t *testing.T, id string) {
	t.Helper()
	ev, err := w.recv(t)
	if err != nil || len(ev.GetNodes()) != 1 || !strings.HasSuffix(ev.GetNodes()[0].GetId(), id) {
		t.Fatalf("got %v, %v; want node %s", ev, err, id)
	}
}

// serverCN is the common name of the certificate the server showed.
func (w *watchStream) serverCN() string {
	p, ok := peer.FromContext(w.stream.Context())
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return ""
	}
	return info.State.PeerCertificates[0].Subject.CommonName
}

// TestServeExpiredCertificate: serve starts with an expired certificate
// (renewal may be on its way: a reload will pick it up) and warns.
func TestServeExpiredCertificate(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	p := certtest.NewCA(t, "ca", certtest.Ed25519PKCS8)
	notAfter := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	cert, key, _, _ := p.Issue(certtest.Spec{CN: "expired", Use: certtest.Server, NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter})
	proc, _ := startServe(t, nil, "--etcd", ep, "--listen-cert", cert, "--listen-key", key)
	waitStderr(t, proc, "level=WARN msg=\"--listen-cert "+cert+": the certificate expired at "+notAfter.Format(time.RFC3339)+"; clients will refuse it")
}
