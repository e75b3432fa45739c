//go:build unix

package main

// serve as a service: its metrics, its logs and its drain, through the
// real binary.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// jsonLogs parses serve's stderr as JSON log lines: every line must be one
// object with time, level and msg.
func jsonLogs(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q: %v", l, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("log line without %q: %q", k, l)
			}
		}
		lines = append(lines, m)
	}
	return lines
}

var metricsURL = regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)

// TestE2EServeLogsAndMetrics runs serve as an operator would: against an
// etcd with authentication, with TLS, JSON logs at debug and metrics. The
// logs parse line by line; every line about a stream names it and its
// peer; no line holds the etcd password or the TLS key; /metrics has
// serve's metrics, the Go runtime's and the process's, and nothing else
// is served there.
func TestE2EServeLogsAndMetrics(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	const password = "pw-7e1f0c2a9d-never-logged"
	etcdtest.EnableAuth(t, c, password)
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Username: "root", Password: password, DialTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r := newRotation(t)
	cmd := serveCmd(t, "--etcd", ep, "--listen-cert", r.certFile, "--listen-key", r.keyFile,
		"--log-format", "json", "--log-level", "debug", "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NODEWATCH_USER=root", "NODEWATCH_PASSWORD="+password)
	sv := runServeCommand(t, cmd)
	m := metricsURL.FindStringSubmatch(sv.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address in %q", sv.stderr.String())
	}

	w := openWatch(t, dialTLS(t, sv.addr, r.client))
	if w.err != nil {
		t.Fatal(w.err)
	}
	putNode(t, root, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
	w.wantNode(t, idB)
	w.cancel()
	waitLog(t, sv.stderr, sv.exited, 1, `"msg":"stream closed"`, `"code":"Canceled"`)

	body := get(t, m[1], http.StatusOK)
	for _, want := range []string{"\nnodewatch_serve_nodes 2\n", `nodewatch_serve_streams_open{method="Watch"} 0`,
		"\nnodewatch_serve_watch_events_sent_total 2\n", "\ngo_goroutines ", "\nprocess_resident_memory_bytes "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	base := strings.TrimSuffix(m[1], "/metrics")
	for _, path := range []string{"/", "/debug/pprof/", "/metrics/x"} {
		get(t, base+path, http.StatusNotFound)
	}

	stopServe(t, sv, exitOK)
	logs := sv.stderr.String()
	lines := jsonLogs(t, logs)
	seen := map[string]int{}
	for _, l := range lines {
		msg := l["msg"].(string)
		seen[msg]++
		if strings.HasPrefix(msg, "stream ") || msg == "event sent" {
			if _, ok := l["stream"].(float64); !ok {
				t.Errorf("a line about a stream without its id: %v", l)
			}
			if p, _ := l["peer"].(string); !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("a line about a stream without its peer: %v", l)
			}
		}
		if (msg == "event sent" || msg == "connection closed") && l["level"] != "DEBUG" {
			t.Errorf("%q logged at %v, want DEBUG", msg, l["level"])
		}
	}
	if seen["connection opened"] > 0 {
		t.Errorf("a connection logged as it opened: one line a connection, as it closes")
	}
	for _, msg := range []string{"connection closed", "stream opened", "stream closed", "event sent", "draining: NOT_SERVING, refusing new streams, sending GOAWAY and ending Watch streams", "drained"} {
		if seen[msg] == 0 {
			t.Errorf("no %q line in the logs", msg)
		}
	}
	key, err := os.ReadFile(r.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{password}
	for _, l := range strings.Split(string(key), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			secrets = append(secrets, l)
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a secret is in the logs: %q", s)
		}
	}
}

// get GETs url and returns its body; the status must be want.
func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %s, want %d", url, resp.Status, want)
	}
	return string(b)
}

// TestE2EServeDrain: a serve replica with 100 open Watch streams, and
// three `nodes` clients that know another replica, is sent SIGTERM while
// nodes change. It drains within --drain-timeout and exits 0; every
// stream ends with UNAVAILABLE; each client moves to the other replica,
// and its printed stream, replayed, ends equal to etcd.
func TestE2EServeDrain(t *testing.T) {
	t.Parallel()
	ids := []string{idA, idB, idC}
	ep, c := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"), node(idB, commonpb.NodeState_NODE_STATE_NEW, ""))
	const drainTimeout = 20 * time.Second
	a := runServeCommand(t, serveCmd(t, "--etcd", ep, "--drain-timeout", drainTimeout.String(), "--log-format", "json"))
	b := runServeCommand(t, serveCmd(t, "--etcd", ep))

	var streams []*watchStream
	for range 10 { // ten connections of ten streams
		conn := dialPlain(t, a.addr)
		for range 10 {
			w := openWatch(t, conn)
			if w.err != nil {
				t.Fatal(w.err)
			}
			streams = append(streams, w)
		}
	}

	type client struct {
		lines  <-chan string
		stderr *testkit.Buffer
		view   *replay.Checker
	}
	var clients []*client
	for range 3 {
		lines, stderr := startLines(t, command(t, "nodes", "--curator", a.addr+","+b.addr))
		clients = append(clients, &client{lines: lines, stderr: stderr, view: &replay.Checker{}})
	}
	// Every client is on a before it drains.
	waitLog(t, a.stderr, a.exited, 103, `"msg":"stream opened"`)

	stop := make(chan struct{})
	var writes sync.WaitGroup
	writes.Go(func() {
		states := []commonpb.NodeState{commonpb.NodeState_NODE_STATE_NEW, commonpb.NodeState_NODE_STATE_STANDBY, commonpb.NodeState_NODE_STATE_UP}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := ids[i%len(ids)]
			if i%7 == 6 {
				etcdtest.Delete(t, c, "/nodes/metropolis-"+id)
				continue
			}
			putNode(t, c, node(id, states[i%len(states)], fmt.Sprintf("10.0.%d.%d", i/250%250, i%250)))
		}
	})
	time.Sleep(100 * time.Millisecond) // changes in flight when the drain begins

	begun := time.Now()
	stopServeWithin(t, a, exitOK, drainTimeout)
	took := time.Since(begun)
	if strings.Contains(a.stderr.String(), "drain timeout") {
		t.Errorf("the drain ran into its timeout (%v): %s", took, a.stderr.String())
	}
	for i, w := range streams {
		for {
			_, err := w.stream.Recv()
			if err == nil {
				continue // a change sent before the drain
			}
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
				t.Fatalf("stream %d ended with %v, want UNAVAILABLE: shutting down", i, err)
			}
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // changes after the drain
	close(stop)
	writes.Wait()

	want := etcdNodes(t, c)
	for i, cl := range clients {
		testkit.Eventually(t, func() error {
			for len(cl.lines) > 0 {
				replayLine(t, cl.view, <-cl.lines)
			}
			if d := cl.view.Equal(want); d != "" {
				return fmt.Errorf("client %d: replayed stream differs from etcd:\n%s\nstderr: %s", i, d, cl.stderr.String())
			}
			return nil
		})
	}
	t.Logf("drained in %v", took)
}

// TestE2EServeDrainTimeout: a client that stopped reading keeps its
// stream's status from being sent; the drain waits --drain-timeout for it,
// then closes the connection and exits 0. During a drain, a second
// SIGTERM exits at once (130).
func TestE2EServeDrainTimeout(t *testing.T) {
	t.Parallel()
	ep, c := fleet(t)
	// A backlog far larger than a stream's flow-control window.
	for i := range 40 {
		n := node(fmt.Sprintf("%032d", i), commonpb.NodeState_NODE_STATE_UP, "10.0.0.1")
		n.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "k", Value: strings.Repeat("x", 4096)}}}
		putNode(t, c, n)
	}
	stalled := func(addr string) {
		// A static 64 KiB window that the client never reads from: the
		// server's Send blocks until the stream is closed under it.
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req := &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
		if _, err := apipb.NewCuratorClient(conn).Watch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("timeout", func(t *testing.T) {
		const drainTimeout = 2 * time.Second
		sv := runServeCommand(t, serveCmd(t, "--etcd", ep, "--drain-timeout", drainTimeout.String()))
		stalled(sv.addr)
		waitLog(t, sv.stderr, sv.exited, 1, "stream opened")
		begun := time.Now()
		stopServe(t, sv, exitOK)
		if took := time.Since(begun); took < drainTimeout {
			t.Errorf("serve exited %v after SIGTERM, before --drain-timeout %v", took, drainTimeout)
		}
		if !strings.Contains(sv.stderr.String(), "drain timeout: closing the connections left") {
			t.Errorf("no word of the timeout: %s", sv.stderr.String())
		}
	})
	t.Run("second signal", func(t *testing.T) {
		sv := runServeCommand(t, serveCmd(t, "--etcd", ep, "--drain-timeout", "1h"))
		stalled(sv.addr)
		waitLog(t, sv.stderr, sv.exited, 1, "stream opened")
		if err := sv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitLog(t, sv.stderr, sv.exited, 1, "draining")
		stopServe(t, sv, exitInterrupted)
		if !strings.Contains(sv.stderr.String(), "again: exiting at once") {
			t.Errorf("no word of the second signal: %s", sv.stderr.String())
		}
	})
}

// servedBinary is a serve process started by runServeCommand.
type servedBinary struct {
	cmd    *exec.Cmd
	stderr *testkit.Buffer
	exited chan struct{}
	addr   string
}

// serveCmd is the command of serve on a free loopback port, with args.
func serveCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	addr, err := unusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	return command(t, append([]string{"serve", "--listen", addr}, args...)...)
}

// runServeCommand starts cmd (from serveCmd) and waits until it
// serves. It is killed when the test ends.
func runServeCommand(t *testing.T, cmd *exec.Cmd) *servedBinary {
	t.Helper()
	sv := &servedBinary{cmd: cmd, stderr: &testkit.Buffer{}, exited: make(chan struct{})}
	for i, a := range cmd.Args {
		if a == "--listen" {
			sv.addr = cmd.Args[i+1]
		}
	}
	cmd.Stderr = sv.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(sv.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-sv.exited
	})
	waitLog(t, sv.stderr, sv.exited, 1, "serving Curator Watch on")
	return sv
}

// stopServe sends sv SIGTERM; it must exit with code within timeout.
func stopServe(t *testing.T, sv *servedBinary, code int) {
	t.Helper()
	stopServeWithin(t, sv, code, timeout)
}

// stopServeWithin sends sv SIGTERM; it must exit with code within d (a
// drain's timeout, say).
func stopServeWithin(t *testing.T, sv *servedBinary, code int, d time.Duration) {
	t.Helper()
	if err := sv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sv.exited:
	case <-time.After(d):
		t.Fatalf("serve did not exit within %v of SIGTERM", d)
	}
	if got := sv.cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("serve exited %d after SIGTERM, want %d; stderr:\n%s", got, code, sv.stderr.String())
	}
}

// TestE2EServeReflection: grpcurl (pinned in tools/go.mod, built from the
// module proxy) lists serve's services and describes them through server
// reflection alone, under the Curator's real package names, and calls
// GetNodes with the descriptors it was served.
func TestE2EServeReflection(t *testing.T) {
	t.Parallel()
	grpcurl := filepath.Join(t.TempDir(), "grpcurl")
	build := exec.Command("go", "build", "-o", grpcurl, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	build.Dir = filepath.Join("..", "..", "tools")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build grpcurl: %v\n%s", err, out)
	}
	ep, _ := fleet(t, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	sv := runServeCommand(t, serveCmd(t, "--etcd", ep))
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(grpcurl, append([]string{"-plaintext", "-max-time", "30"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	got := strings.Fields(run(sv.addr, "list"))
	want := []string{
		"grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection",
		"metropolis.node.core.curator.proto.api.Curator",
		"metropolis.node.core.curator.proto.api.CuratorLocal",
		"metropolis.proto.api.Management",
	}
	if !slices.Equal(got, want) {
		t.Errorf("grpcurl list: %q, want %q", got, want)
	}
	desc := run(sv.addr, "describe", "metropolis.node.core.curator.proto.api.Curator")
	if w := "rpc Watch ( .metropolis.node.core.curator.proto.api.WatchRequest ) returns ( stream .metropolis.node.core.curator.proto.api.WatchEvent );"; !strings.Contains(desc, w) {
		t.Errorf("describe Curator: no %q in\n%s", w, desc)
	}
	if desc := run(sv.addr, "describe", "metropolis.node.core.curator.proto.api.Node"); !strings.Contains(desc, ".metropolis.proto.common.NodeState state = ") {
		t.Errorf("describe Node: no state field in\n%s", desc)
	}
	if out := run(sv.addr, "metropolis.proto.api.Management/GetNodes"); !strings.Contains(out, `"id": "metropolis-`+idA+`"`) || !strings.Contains(out, `"NODE_STATE_UP"`) {
		t.Errorf("GetNodes through reflection: %s", out)
	}
}
