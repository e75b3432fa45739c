//go:build unix

package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// slowCurator is a Curator on the real wire whose backlog is slow: one
// node per event, pause apart, then PROGRESS_LAST_BACKLOGGED, then one
// update (node 0 moves to 10.9.9.9). It stands for a large cluster behind
// a slow link: the listing takes seconds.
type slowCurator struct {
	apipb.UnimplementedCuratorServer
	nodes int
	pause time.Duration
}

func (s *slowCurator) node(i int, addr string) *apipb.Node {
	return &apipb.Node{Id: fmt.Sprintf("metropolis-%032d", i), State: commonpb.NodeState_NODE_STATE_UP, Status: &commonpb.NodeStatus{ExternalAddress: addr}}
}

func (s *slowCurator) Watch(_ *apipb.WatchRequest, st grpc.ServerStreamingServer[apipb.WatchEvent]) error {
	t := time.NewTicker(s.pause)
	defer t.Stop()
	for i := range s.nodes {
		if err := st.Send(&apipb.WatchEvent{Nodes: []*apipb.Node{s.node(i, fmt.Sprintf("10.0.0.%d", i))}}); err != nil {
			return err
		}
		select {
		case <-t.C:
		case <-st.Context().Done():
			return st.Context().Err()
		}
	}
	if err := st.Send(&apipb.WatchEvent{Progress: apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED}); err != nil {
		return err
	}
	if err := st.Send(&apipb.WatchEvent{Nodes: []*apipb.Node{s.node(0, "10.9.9.9")}}); err != nil {
		return err
	}
	<-st.Context().Done()
	return nil
}

// startSlowCurator serves a slowCurator on loopback and returns its
// address.
func startSlowCurator(t *testing.T, nodes int, pause time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	apipb.RegisterCuratorServer(srv, &slowCurator{nodes: nodes, pause: pause})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// TestE2ETerminal: on a terminal (stdout and stderr both on a
// pseudo-terminal, as in a shell), `nodes -o text` shows the progress of a
// listing that takes seconds on stderr, then every node, then the update
// as path: old → new; through pipes, the same run shows neither the
// progress line nor any escape code.
func TestE2ETerminal(t *testing.T) {
	t.Parallel()
	// 30 nodes 100ms apart: a backlog of 3 s, well over the second after
	// which progress is shown.
	addr := startSlowCurator(t, 30, 100*time.Millisecond)
	args := []string{"nodes", "--curator", addr, "-o", "text", "--count", "31"}

	got := onTerminal(t, command(t, args...))
	for _, want := range []string{
		"\rnodewatch: listing… ", " objects, ", // the progress line, drawn in place
		"\r\x1b[K", // and erased
		"\x1b[32mnew     \x1b[0m metropolis-00000000000000000000000000000029  UP 10.0.0.29",
		"\x1b[33mupdated \x1b[0m metropolis-00000000000000000000000000000000  UP 10.9.9.9\r\n" +
			`           .status.external_address: ` + "\x1b[31m" + `"10.0.0.0"` + "\x1b[0m → \x1b[32m" + `"10.9.9.9"` + "\x1b[0m",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q", want)
		}
	}
	// The line is gone before the first node is printed: no node line
	// starts after progress text on the same line.
	j := strings.Index(got, "new     ")
	i := strings.LastIndex(got[:max(j, 0)], "listing…")
	if i < 0 || j < 0 || !strings.Contains(got[i:j], "\r\x1b[K") {
		t.Errorf("the progress line was not erased before the nodes were printed")
	}
	if t.Failed() {
		t.Logf("terminal output:\n%q", got)
	}

	code, out, errOut := runCmd(t, command(t, args...))
	if code != 0 || strings.Contains(out+errOut, "\x1b") || strings.Contains(out+errOut, "listing") {
		t.Errorf("through pipes: exit %d, stdout %q, stderr %q; want no escape codes and no progress", code, out, errOut)
	}
	if !strings.Contains(out, `           .status.external_address: "10.0.0.0" → "10.9.9.9"`) {
		t.Errorf("through pipes: no change line in %q", out)
	}
}

// TestE2ETerminalDumb: on a terminal that says it is dumb (TERM=dumb, as
// Emacs' shell), `nodes -o text` colours nothing and draws no progress
// line; --color always still colours.
func TestE2ETerminalDumb(t *testing.T) {
	t.Parallel()
	addr := startSlowCurator(t, 15, 100*time.Millisecond)
	args := []string{"nodes", "--curator", addr, "-o", "text", "--once"}
	cmd := command(t, args...)
	cmd.Env = append(cmd.Env, "TERM=dumb")
	if got := onTerminal(t, cmd); strings.Contains(got, "\x1b") || strings.Contains(got, "listing") || !strings.Contains(got, "new      metropolis-") {
		t.Errorf("TERM=dumb: want the nodes without escape codes or progress, got %q", got)
	}
	cmd = command(t, append(args, "--color", "always")...)
	cmd.Env = append(cmd.Env, "TERM=dumb")
	if got := onTerminal(t, cmd); !strings.Contains(got, "\x1b[32mnew     \x1b[0m metropolis-") {
		t.Errorf("TERM=dumb --color always: want colour, got %q", got)
	}
}

// TestE2ETerminalHelp: on a terminal, help is wrapped to its width (100
// columns here), not to 80.
func TestE2ETerminalHelp(t *testing.T) {
	t.Parallel()
	got := onTerminal(t, command(t, "nodes", "--help"))
	widest := 0
	for _, l := range strings.Split(got, "\n") {
		widest = max(widest, utf8.RuneCountInString(strings.TrimRight(l, "\r")))
	}
	if widest <= 80 || widest > 100 {
		t.Errorf("nodes --help on a terminal of 100 columns: widest line %d columns, want 81 to 100:\n%s", widest, got)
	}
}
