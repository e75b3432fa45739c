package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/certtest"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// The parts of the Kubernetes objects the test reads, from the JSON
// kubecheck prints once it has decoded them strictly into the API's types.
type (
	object struct {
		File   string          `json:"file"`
		Kind   string          `json:"kind"`
		Name   string          `json:"name"`
		Object json.RawMessage `json:"object"`
	}
	meta struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	deployment struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Template struct {
				Metadata meta    `json:"metadata"`
				Spec     podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
		AutomountServiceAccountToken  *bool  `json:"automountServiceAccountToken"`
		SecurityContext               *struct {
			RunAsNonRoot   *bool `json:"runAsNonRoot"`
			SeccompProfile *struct {
				Type string `json:"type"`
			} `json:"seccompProfile"`
		} `json:"securityContext"`
		Containers []container `json:"containers"`
		Volumes    []struct {
			Name   string `json:"name"`
			Secret *struct {
				SecretName string `json:"secretName"`
				Items      []struct {
					Key  string `json:"key"`
					Path string `json:"path"`
				} `json:"items"`
			} `json:"secret"`
		} `json:"volumes"`
	}
	container struct {
		Name    string   `json:"name"`
		Command []string `json:"command"`
		Args    []string `json:"args"`
		Env     []struct {
			Name      string `json:"name"`
			Value     string `json:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secretKeyRef"`
			} `json:"valueFrom"`
		} `json:"env"`
		Ports []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
		ReadinessProbe *probe `json:"readinessProbe"`
		LivenessProbe  *probe `json:"livenessProbe"`
		Lifecycle      *struct {
			PreStop *struct {
				Sleep *struct {
					Seconds int64 `json:"seconds"`
				} `json:"sleep"`
			} `json:"preStop"`
		} `json:"lifecycle"`
		Resources struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			Capabilities             *struct {
				Drop []string `json:"drop"`
			} `json:"capabilities"`
		} `json:"securityContext"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"volumeMounts"`
	}
	probe struct {
		GRPC *struct {
			Port    int     `json:"port"`
			Service *string `json:"service"`
		} `json:"grpc"`
	}
	service struct {
		Spec struct {
			Selector map[string]string `json:"selector"`
			Ports    []struct {
				Name       string          `json:"name"`
				Port       int             `json:"port"`
				TargetPort json.RawMessage `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	disruptionBudget struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
		} `json:"spec"`
	}
)

// etcdSecret is the Secret the Deployment reads the etcd credentials
// from, and its keys: what deploy/README.md's `kubectl create secret`
// creates.
const etcdSecret = "nodewatch-etcd"

// TestKubernetes checks deploy/kubernetes/: every document decodes
// strictly into its Kubernetes type (kubecheck, a module of its own
// pinning k8s.io/api); the Deployment runs 2 or more replicas of serve with
// flags and variables serve accepts, hardened, probed with the gRPC
// health check on the port serve listens on, which the Service targets;
// the pod's grace period covers the preStop sleep and the drain; the
// metrics port agrees everywhere; the etcd credentials come from the Secret
// that the README creates; the selectors select the pods. Then the
// container's command line and environment, with the ports, etcd's
// endpoints and the Secret the test's, serve from a real etcd with TLS and a user
// and password, and end with 0 on SIGTERM.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubernetes/*.yaml (%v)", err)
	}
	objs := kubecheck(t, files)
	var deps []deployment
	var svcs []service
	var pdbs []disruptionBudget
	for _, o := range objs {
		var err error
		switch o.Kind {
		case "Deployment":
			deps = append(deps, deployment{})
			err = json.Unmarshal(o.Object, &deps[len(deps)-1])
		case "Service":
			svcs = append(svcs, service{})
			err = json.Unmarshal(o.Object, &svcs[len(svcs)-1])
		case "PodDisruptionBudget":
			pdbs = append(pdbs, disruptionBudget{})
			err = json.Unmarshal(o.Object, &pdbs[len(pdbs)-1])
		}
		if err != nil {
			t.Fatalf("%s: %s %s: %v", o.File, o.Kind, o.Name, err)
		}
	}
	if len(deps) != 1 || len(svcs) != 1 {
		t.Fatalf("%d Deployments and %d Services, want one of each", len(deps), len(svcs))
	}
	dep, svc := deps[0], svcs[0]
	pod := dep.Spec.Template.Spec
	labels := dep.Spec.Template.Metadata.Labels

	if r := dep.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("replicas %s, want 2 or more (a client moves to another replica when one drains)", jsonOf(r))
	}
	selects := func(what string, sel map[string]string) {
		t.Helper()
		if len(sel) == 0 {
			t.Errorf("%s selects every pod", what)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s selects %s=%s; the pods are labelled %v", what, k, v, labels)
			}
		}
	}
	selects("the Deployment", dep.Spec.Selector.MatchLabels)
	selects("the Service", svc.Spec.Selector)
	for _, pdb := range pdbs {
		selects("the PodDisruptionBudget", pdb.Spec.Selector.MatchLabels)
	}

	// The pod's hardening.
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("the pod's securityContext wants runAsNonRoot: true and seccompProfile RuntimeDefault")
	}
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken: want false (serve does not talk to Kubernetes)")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("the container's securityContext wants allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities drop [ALL]")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// The command line: serve, with flags and variables it accepts, run
	// by the binary where the release image has it (tools/release).
	if len(c.Command) != 1 || c.Command[0] != "/usr/bin/nodewatch" || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("command %q args %q, want [/usr/bin/nodewatch] [serve …], as in the release image", c.Command, c.Args)
	}
	bin := nodewatch(t)
	cli := readServeCLI(t, bin)
	flags, err := cli.parse(c.Args[1:])
	if err != nil {
		t.Errorf("args: %v", err)
	}
	var envNames []string
	for _, e := range c.Env {
		envNames = append(envNames, e.Name)
		if strings.Contains(e.Name, "PASSWORD") && e.ValueFrom == nil {
			t.Errorf("$%s is given in the manifest: want it from a Secret (valueFrom.secretKeyRef)", e.Name)
		}
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name != etcdSecret {
			t.Errorf("$%s from Secret %s, want %s (the README creates it)", e.Name, r.SecretKeyRef.Name, etcdSecret)
		}
	}
	if err := cli.checkEnv(envNames); err != nil {
		t.Errorf("env: %v", err)
	}
	if f, _ := value(flags, "log-format"); f != "json" {
		t.Errorf("--log-format %q, want json (what a cluster's log collectors read)", f)
	}

	// gRPC: --listen, the container port, both probes and the Service agree.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	grpcPort := port(t, flags, "listen")
	if grpcPort != 7835 {
		t.Errorf("--listen port %d, want 7835, the Curator's", grpcPort)
	}
	if ports["grpc"] != grpcPort {
		t.Errorf("container port grpc %d, --listen port %d", ports["grpc"], grpcPort)
	}
	for name, p := range map[string]*probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		switch {
		case p == nil || p.GRPC == nil:
			t.Errorf("%s: want a grpc: probe (serve answers grpc.health.v1)", name)
		case p.GRPC.Port != grpcPort:
			t.Errorf("%s probes port %d, serve listens on %d", name, p.GRPC.Port, grpcPort)
		case p.GRPC.Service != nil && *p.GRPC.Service != "":
			t.Errorf("%s asks for service %q; serve's health is asked for \"\"", name, *p.GRPC.Service)
		}
	}
	svcPort := func(name string) (port, target int) {
		t.Helper()
		for _, p := range svc.Spec.Ports {
			if p.Name != name {
				continue
			}
			var n int
			var s string
			switch {
			case json.Unmarshal(p.TargetPort, &n) == nil:
				return p.Port, n
			case json.Unmarshal(p.TargetPort, &s) == nil:
				if _, ok := ports[s]; !ok {
					t.Errorf("the Service's port %s targets %q, which the container does not name", name, s)
				}
				return p.Port, ports[s]
			}
			return p.Port, p.Port // no targetPort: the port itself
		}
		t.Errorf("the Service has no port named %s", name)
		return 0, 0
	}
	if p, target := svcPort("grpc"); p != 7835 || target != grpcPort {
		t.Errorf("the Service's grpc port %d targets %d; want 7835 targeting --listen's %d", p, target, grpcPort)
	}

	// Metrics: --metrics-addr, the container port, the Service, the
	// scrape annotation.
	metricsPort := port(t, flags, "metrics-addr")
	if ports["metrics"] != metricsPort {
		t.Errorf("container port metrics %d, --metrics-addr port %d", ports["metrics"], metricsPort)
	}
	if _, target := svcPort("metrics"); target != metricsPort {
		t.Errorf("the Service's metrics port targets %d, --metrics-addr port %d", target, metricsPort)
	}
	if a := dep.Spec.Template.Metadata.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(metricsPort) {
		t.Errorf("pod annotations prometheus.io/scrape %q, prometheus.io/port %q; want \"true\", %q", a["prometheus.io/scrape"], a["prometheus.io/port"], strconv.Itoa(metricsPort))
	}

	// Stopping: the grace period covers the preStop sleep and the drain.
	drain := drainTimeout(t, flags)
	var sleep int64
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		sleep = l.PreStop.Sleep.Seconds
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil {
		t.Errorf("no terminationGracePeriodSeconds: Kubernetes' default (30s) is not something to rely on beside --drain-timeout %v", drain)
	} else if float64(*g) <= float64(sleep)+drain.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d is not longer than the preStop sleep (%ds) and --drain-timeout (%v) together: serve would be killed while it drains", *g, sleep, drain)
	}

	// The Secret, as the README creates it, and the files of it mounted.
	keys := readmeSecretKeys(t)
	secretFiles := map[string]string{} // mount path of a file → Secret key
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.SecretName != etcdSecret {
			t.Errorf("volume %s is Secret %s, want %s (the README creates it)", v.Name, v.Secret.SecretName, etcdSecret)
		}
		for _, m := range c.VolumeMounts {
			if m.Name != v.Name {
				continue
			}
			for _, it := range v.Secret.Items {
				secretFiles[filepath.Join(m.MountPath, it.Path)] = it.Key
			}
			if len(v.Secret.Items) == 0 {
				for _, k := range keys {
					secretFiles[filepath.Join(m.MountPath, k)] = k
				}
			}
		}
	}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !slices.Contains(keys, r.SecretKeyRef.Key) {
			t.Errorf("$%s from key %q of the Secret, which the README's kubectl create secret does not make (it makes %q)", e.Name, r.SecretKeyRef.Key, keys)
		}
	}
	for _, key := range secretFiles {
		if !slices.Contains(keys, key) {
			t.Errorf("a volume mounts key %q of the Secret, which the README's kubectl create secret does not make (it makes %q)", key, keys)
		}
	}
	if t.Failed() {
		return
	}

	// The container, run here: etcd serves TLS and wants a user and a
	// password; the Secret holds them and the CA.
	etcdCA := certtest.NewCA(t, "ca", certtest.Ed25519PKCS8)
	etcdCert, etcdKey, _, _ := etcdCA.Issue(certtest.Spec{CN: "etcd", Use: certtest.Server})
	ep := etcdtest.StartTLS(t, embedetcd.TLS{CertFile: etcdCert, KeyFile: etcdKey})
	prefix := curator.DefaultPrefix
	if p, ok := value(flags, "prefix"); ok {
		prefix = p
	}
	password := "test-" + strconv.FormatInt(int64(os.Getpid()), 36)
	etcdReader(t, ep, etcdCA, prefix, "nodewatch", password)
	ca, err := os.ReadFile(etcdCA.File)
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]string{"user": "nodewatch", "password": password, "ca.crt": string(ca)}
	mounts := t.TempDir()
	env := []string{"HOME=" + t.TempDir()}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = secret[e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom != nil:
			t.Fatalf("$%s: the test knows only values from the Secret", e.Name)
		case e.Name == "NODEWATCH_ETCD":
			v = ep
		}
		if key, ok := secretFiles[v]; ok {
			v = filepath.Join(mounts, filepath.Base(v))
			if err := os.WriteFile(v, []byte(secret[key]), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	for _, f := range flags {
		if _, ok := secretFiles[f.value]; ok {
			t.Fatalf("--%s %s: the test runs files of the Secret given in variables only", f.name, f.value)
		}
	}
	listenArg, listen := onFreePort(t, flags, "listen")
	metricsArg, metrics := onFreePort(t, flags, "metrics-addr")
	runServe(t, run{
		bin:      bin,
		args:     replace(c.Args, map[string]string{"listen": listenArg, "metrics-addr": metricsArg}),
		env:      env,
		listen:   listen,
		metrics:  metrics,
		creds:    insecure.NewCredentials(),
		jsonLogs: true,
		drain:    drain,
	})
}

// jsonOf returns v as JSON, for messages.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// kubecheck decodes files strictly into their Kubernetes types with
// deploy/kubecheck (go run, in its own module: its dependencies come from
// the module proxy, not nodewatch's go.mod) and returns the objects.
func kubecheck(t *testing.T, files []string) []object {
	t.Helper()
	args := []string{"run", "-mod=readonly", "."}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, abs)
	}
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = "kubecheck"
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubecheck: %v\n%s", err, stderr.String())
	}
	var objs []object
	if err := json.Unmarshal(stdout.Bytes(), &objs); err != nil {
		t.Fatalf("kubecheck's output: %v\n%s", err, stdout.String())
	}
	return objs
}

// readmeSecretKeys returns the keys of the Secret the README's `kubectl
// create secret generic nodewatch-etcd` makes (--from-literal=KEY=… and
// --from-file=KEY=…).
func readmeSecretKeys(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`kubectl create secret generic ` + regexp.QuoteMeta(etcdSecret) + `((?:[ \t]*\\?\n?[ \t]*--[a-z-]+=\S+)+)`).FindSubmatch(readme)
	if cmd == nil {
		t.Fatalf("README.md has no `kubectl create secret generic %s --from-…`", etcdSecret)
	}
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`--from-(?:literal|file)=([^=\s]+)=`).FindAllSubmatch(cmd[1], -1) {
		keys[string(m[1])] = true
	}
	return slices.Sorted(maps.Keys(keys))
}

// etcdReader makes user (with password) able to read prefix in the etcd
// at ep and nothing else, and turns authentication on.
func etcdReader(t *testing.T, ep string, ca *certtest.CA, prefix, user, password string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: ca.ClientTLS(), DialTimeout: testkit.Timeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Timeout)
	defer cancel()
	role := user + "-reader"
	for _, step := range []func() error{
		func() error { _, err := c.RoleAdd(ctx, role); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, password); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, role); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(fmt.Errorf("etcd user %s: %w", user, err))
		}
	}
	etcdtest.EnableAuth(t, c, "root-"+password)
}
