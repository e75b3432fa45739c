// Package deploy holds no code: its tests check the examples beside them,
// the systemd unit (systemd/) and the Kubernetes manifests (kubernetes/),
// which run `nodewatch serve`. Each example's command line is taken apart
// as serve's own parser would take it (the flags and variables that
// `serve --help` lists), checked against the rest of the example (ports,
// timeouts, credentials), and run: the built binary, with only the
// ports, etcd's endpoints and the credentials' files changed, against a
// real etcd, must serve
// (health SERVING, reflection, metrics) and end with 0 on SIGTERM.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// nodewatch builds the nodewatch binary of this tree into a temporary
// directory of t and returns its path.
func nodewatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodewatch")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/nodewatch")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nodewatch: %v\n%s", err, out)
	}
	return bin
}

// serveCLI is the command line of `nodewatch serve`, as its --help lists
// it (the help is printed from the flags' own definitions).
type serveCLI struct {
	// takesValue says, for each flag by name (without dashes), whether it
	// takes a value.
	takesValue map[string]bool
	// env holds the environment variables serve reads (NODEWATCH_…).
	env map[string]bool
}

// readServeCLI runs bin serve --help and reads the flags and variables it
// lists.
func readServeCLI(t *testing.T, bin string) serveCLI {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "serve", "--help")
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nodewatch serve --help: %v", err)
	}
	c := serveCLI{takesValue: map[string]bool{}, env: map[string]bool{}}
	// A flag's line: its name, other names, the value's placeholder if it
	// takes one, then two spaces.
	helpFlag := regexp.MustCompile(`(?m)^\s+--([a-z0-9][a-z0-9-]*)(?:, -[a-zA-Z])*( \S+)?\s\s`)
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		c.takesValue[m[1]] = m[2] != ""
	}
	for _, v := range regexp.MustCompile(`\bNODEWATCH_[A-Z0-9_]+\b`).FindAllString(string(out), -1) {
		c.env[v] = true
	}
	// The help is what the flags are read from: if these are missing, the
	// help's layout changed under the patterns above.
	if !c.takesValue["listen"] || c.takesValue["insecure"] || !c.env["NODEWATCH_ETCD"] {
		t.Fatalf("cannot read serve's flags from its --help (found %v, %v):\n%s", c.takesValue, c.env, out)
	}
	return c
}

// flag is a flag of an example's command line and its value ("" for one
// that takes none).
type flag struct{ name, value string }

// parse takes apart the flags of a serve command line (what follows
// "serve") as serve's parser would: --name=value, or --name value for a
// flag that takes a value. Every flag serve does not know, every argument
// that is not a flag and every flag without its value is an error.
func (c serveCLI) parse(args []string) ([]flag, error) {
	var flags []flag
	var errs []error
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			errs = append(errs, fmt.Errorf("%q: not a flag (serve takes no arguments; the examples spell flags --name)", a))
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		takes, ok := c.takesValue[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("--%s: not a flag of nodewatch serve (see serve --help)", name))
		case takes && !hasValue && i+1 == len(args):
			errs = append(errs, fmt.Errorf("--%s: no value", name))
		case takes && !hasValue:
			i++
			value = args[i]
		case !takes && hasValue && value != "true" && value != "false":
			errs = append(errs, fmt.Errorf("--%s=%s: the flag takes no value", name, value))
		}
		flags = append(flags, flag{name, value})
	}
	return flags, errors.Join(errs...)
}

// checkEnv reports each variable among names that serve does not read.
func (c serveCLI) checkEnv(names []string) error {
	var errs []error
	for _, n := range names {
		if strings.HasPrefix(n, "NODEWATCH_") && !c.env[n] {
			errs = append(errs, fmt.Errorf("$%s: serve reads no such variable (see serve --help)", n))
		}
	}
	return errors.Join(errs...)
}

// value returns the value of the last --name in flags (the one serve
// keeps), and whether there is one.
func value(flags []flag, name string) (string, bool) {
	for _, f := range slices.Backward(flags) {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

// hostPort returns the host and the port of the HOST:PORT address of
// --name in flags.
func hostPort(t *testing.T, flags []flag, name string) (host, port string) {
	t.Helper()
	v, ok := value(flags, name)
	if !ok {
		t.Fatalf("no --%s", name)
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		t.Fatalf("--%s %s: %v", name, v, err)
	}
	return host, port
}

// port returns the port of the HOST:PORT address of --name in flags.
func port(t *testing.T, flags []flag, name string) int {
	t.Helper()
	_, p := hostPort(t, flags, name)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("--%s: port %q is not a number", name, p)
	}
	return n
}

// drainTimeout returns the example's --drain-timeout, which it must
// give: the timeouts around serve are checked against it.
func drainTimeout(t *testing.T, flags []flag) time.Duration {
	t.Helper()
	v, ok := value(flags, "drain-timeout")
	if !ok {
		t.Fatal("no --drain-timeout: the examples give it, so that the stop timeouts beside it can be checked against it")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("--drain-timeout %s: %v", v, err)
	}
	return d
}

// replace returns args with the value of each --name in with replaced by
// with[name], in the form it was given in (--name=value or --name value).
func replace(args []string, with map[string]string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		name, _, eq := strings.Cut(strings.TrimPrefix(out[i], "--"), "=")
		v, ok := with[name]
		switch {
		case !ok || !strings.HasPrefix(out[i], "--"):
		case eq:
			out[i] = "--" + name + "=" + v
		case i+1 < len(out):
			i++
			out[i] = v
		}
	}
	return out
}

// onFreePort returns the address of --name in flags with its host kept
// (serve's rules depend on it: plaintext only on loopback unless
// --insecure) and its port replaced by one that was free a moment ago;
// and the loopback address that reaches it.
func onFreePort(t *testing.T, flags []flag, name string) (arg, dial string) {
	t.Helper()
	host, _ := hostPort(t, flags, name)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return net.JoinHostPort(host, port), net.JoinHostPort("127.0.0.1", port)
}

// run is an example's serve, made to run here: its command line and
// environment with the ports, etcd's endpoints and the credentials'
// files replaced by the test's.
type run struct {
	bin  string
	args []string // after the binary
	env  []string
	// listen and metrics are the loopback addresses that reach serve's
	// gRPC and metrics.
	listen, metrics string
	// creds are what a client of listen needs.
	creds credentials.TransportCredentials
	// jsonLogs: --log-format json, every line on stderr is a JSON object.
	jsonLogs bool
	drain    time.Duration
}

// runServe starts r and checks that it serves: the health service
// answers SERVING for "" (what the probes ask), reflection lists the
// Curator, /metrics answers with Prometheus' text format, the logs are
// in the format asked for; then SIGTERM must end it with 0 within the
// drain timeout (and the test's margin).
func runServe(t *testing.T, r run) {
	t.Helper()
	var stderr testkit.Buffer
	cmd := exec.Command(r.bin, r.args...)
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited holds Wait's result once serve has ended; whoever takes it
	// puts it back.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	failIfExited := func() {
		t.Helper()
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nodewatch %s ended early (%v); it printed:\n%s", strings.Join(r.args, " "), err, stderr.String())
		default:
		}
	}

	conn, err := grpc.NewClient(r.listen, grpc.WithTransportCredentials(r.creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Timeout)
	defer cancel()
	testkit.Eventually(t, func() error {
		failIfExited()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("health check: %w", err)
		}
		if resp.Status != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health check: %v", resp.Status)
		}
		return nil
	})

	// What `grpcurl HOST:7835 list` shows in deploy/README.md.
	if got, err := listServices(ctx, conn); err != nil {
		t.Errorf("reflection: %v", err)
	} else {
		for _, s := range []string{"grpc.health.v1.Health", "metropolis.node.core.curator.proto.api.Curator"} {
			if !slices.Contains(got, s) {
				t.Errorf("reflection lists %v, not %s", got, s)
			}
		}
	}
	conn.Close()

	if err := scrape(ctx, r.metrics); err != nil {
		t.Errorf("metrics: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("serve ended with %v on SIGTERM, want exit status 0; it printed:\n%s", err, stderr.String())
		}
	case <-time.After(r.drain + testkit.Timeout):
		t.Fatalf("serve did not end within %v of SIGTERM (--drain-timeout %v); it printed:\n%s", r.drain+testkit.Timeout, r.drain, stderr.String())
	}

	logs := strings.TrimSpace(stderr.String())
	if logs == "" {
		t.Errorf("serve logged nothing")
	}
	for line := range strings.Lines(logs) {
		var v map[string]any
		isJSON := json.Unmarshal([]byte(line), &v) == nil
		switch {
		case r.jsonLogs && !isJSON:
			t.Errorf("--log-format json, but a line of the log is not a JSON object: %q", line)
		case !r.jsonLogs && isJSON:
			t.Errorf("--log-format text, but a line of the log is JSON: %q", line)
		}
	}
}

// listServices lists the services conn's server has, through gRPC
// reflection, as grpcurl's list does.
func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer stream.CloseSend()
	req := &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}
	if err := stream.Send(req); err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		return nil, fmt.Errorf("code %d: %s", e.ErrorCode, e.ErrorMessage)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	return names, nil
}

// scrape gets /metrics from addr as Prometheus would, and checks that
// the answer is in Prometheus' text format.
func scrape(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.Contains(string(body), "# TYPE ") {
		return fmt.Errorf("GET /metrics: %s, not Prometheus' text format:\n%.500s", resp.Header.Get("Content-Type"), body)
	}
	return nil
}
