//go:build unix

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/mgmttest"
)

// exportedPattern names the segments of mgmt's exported resources.
const exportedPattern = "/_mgmt/exported/{to}/{from}/{kind}/{name...}"

// TestKeyMgmtExported: an mgmt-shaped World in real etcd (resources
// exported to every host and to named hosts, a name with "/", gob values
// as mgmt writes them), followed with --key-pattern and --value gob: each
// object carries its key's segments as .fields, jq selects on them, and a
// change to a resource says what changed inside it.
func TestKeyMgmtExported(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	content := "v1\n"
	file := &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/tmp/foo", "*"), Path: "/tmp/foo", Content: &content, State: "exists"}
	etcdtest.Put(t, c, "/_mgmt/exported/*/h1/file//tmp/foo", string(mgmttest.ResToB64(t, file)))
	etcdtest.Put(t, c, "/_mgmt/exported/h3/h2/svc/nginx", string(mgmttest.ResToB64(t, &mgmttest.SvcRes{Base: mgmttest.NewBase("svc", "nginx", "h3"), State: "running"})))
	etcdtest.Put(t, c, "/_mgmt/exported/h2/h1/file//etc/motd", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/etc/motd", "h2"), Path: "/etc/motd"})))

	// Files exported to h3 or to every host, as `mgmt` on h3 collects
	// them.
	p := start(t, "key", "/_mgmt/exported/", "--prefix", "--etcd", ep, "--key-pattern", exportedPattern, "--value", "gob",
		"--filter", `.fields.kind == "file" and (.fields.to == "*" or .fields.to == "h3")`)
	got := p.batch(t)
	content = "v2\n"
	etcdtest.Put(t, c, "/_mgmt/exported/*/h1/file//tmp/foo", string(mgmttest.ResToB64(t, file)))
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/_mgmt/exported/h3/h1/file//srv/x", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/srv/x", "h3"), Path: "/srv/x", Mode: "0600"})))
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/_mgmt/exported/h2/h1/file//etc/motd", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/etc/motd", "h2"), Path: "/etc/motd", Mode: "0644"})))
	p.none(t) // exported to h2 only: not h3's
	etcdtest.Delete(t, c, "/_mgmt/exported/*/h1/file//tmp/foo")
	got = append(got, p.batch(t)...)
	golden(t, got)
}

// mgmtWorld writes an mgmt-shaped World: exports to every host and to
// named hosts (names with "/"), a Str and a StrMap, a deploy, and the
// scheduler's keys, the host's one under a lease of leaseTTL seconds. It
// returns the lease.
func mgmtWorld(t *testing.T, c *clientv3.Client, leaseTTL int64) clientv3.LeaseID {
	t.Helper()
	put := func(k string, v []byte) { etcdtest.Put(t, c, k, string(v)) }
	content := "hello\n"
	put("/_mgmt/exported/*/h1/file//tmp/foo", mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/tmp/foo", "*"), Path: "/tmp/foo", Content: &content}))
	put("/_mgmt/exported/h3/h2/svc/nginx", mgmttest.ResToB64(t, &mgmttest.SvcRes{Base: mgmttest.NewBase("svc", "nginx", "h3"), State: "running"}))
	put("/_mgmt/exported/h2/h1/file//etc/motd", mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/etc/motd", "h2"), Path: "/etc/motd"}))
	put("/_mgmt/exported/h3/h1/file//srv/x", mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/srv/x", "h3"), Path: "/srv/x"}))
	put("/_mgmt/strings/greeting", []byte("hi"))
	put("/_mgmt/strings/color/h1", []byte("red"))
	put("/_mgmt/strings/color/h2", []byte("blue"))
	put("/_mgmt/deploy/1/hash", []byte("4f2a9c"))
	put("/_mgmt/scheduler/schedule/web", []byte("h1,h2"))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lease, err := c.Grant(ctx, leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/_mgmt/scheduler/hostname/h1/web", "maxCount=2&persist=false&sessionTTL=10&strategy=rr", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

// TestKeyMgmtPreset: --mgmt over an mgmt-shaped World in real etcd, each
// area and each collect flag; --for HOST follows two prefixes, with a
// change arriving in each; the scheduler's leased key goes when its
// lease expires.
func TestKeyMgmtPreset(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	lease := mgmtWorld(t, c, 2)
	// The lease is kept alive (as mgmt's scheduler does) until the
	// scheduler's state has been printed, however slow the machine.
	keep, stopKeeping := context.WithCancel(context.Background())
	defer stopKeeping()
	if _, err := c.KeepAlive(keep, lease); err != nil {
		t.Fatal(err)
	}
	var got []string
	once := func(args ...string) {
		t.Helper()
		stdout, stderr, code := runSync(t, append([]string{"key", "--etcd", ep, "--once"}, args...)...)
		if code != 0 || stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		got = append(got, "# "+strings.Join(args, " "))
		got = append(got, strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")...)
	}
	once("--mgmt", "exported", "--kind", "svc")
	once("--mgmt", "exported", "--from", "h1", "--name", "/tmp/foo")
	// The preset's conditions come before the user's filter: a filter
	// that expects a file never sees the service (--strict would fail on
	// it), and a comment at its end ends nothing else.
	once("--mgmt", "exported", "--kind", "file", "--strict", "--filter", `.value.Path | startswith("/srv") # files under /srv`)
	once("--mgmt", "strings")
	once("--mgmt", "deploy")

	// What h3 collects, live: two prefixes, a change in each, and none
	// from a third.
	got = append(got, "# --mgmt exported --for h3 --kind file")
	p := start(t, "key", "--etcd", ep, "--mgmt", "exported", "--for", "h3", "--kind", "file")
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/_mgmt/exported/h2/h1/file//etc/issue", "not h3's: "+string(mgmttest.ResToB64(t, &mgmttest.FileRes{Path: "/etc/issue"})))
	etcdtest.Put(t, c, "/_mgmt/exported/*/h2/file//tmp/bar", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/tmp/bar", "*"), Path: "/tmp/bar"})))
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/_mgmt/exported/h3/h2/file//srv/y", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/srv/y", "h3"), Path: "/srv/y"})))
	got = append(got, p.batch(t)...)

	// The scheduler: the host's key is leased; it goes when the lease
	// expires (nobody keeps it alive).
	got = append(got, "# --mgmt scheduler")
	s := start(t, "key", "--etcd", ep, "--mgmt", "scheduler")
	got = append(got, s.batch(t)...)
	stopKeeping()
	got = append(got, s.batch(t)...)
	// Lease ids are random: the golden file has LEASE.
	leaseID := regexp.MustCompile(`"lease":[1-9][0-9]*`)
	for i := range got {
		got[i] = leaseID.ReplaceAllString(got[i], `"lease":LEASE`)
	}
	golden(t, got)
}

// TestE2EMgmtRecipes runs the README's mgmt recipes, as written, with the
// built nodewatch and jq, against an mgmt-shaped World.
func TestE2EMgmtRecipes(t *testing.T) {
	t.Parallel()
	recipes, path := readmeRecipes(t, "## Following mgmt's World", 3)
	ep, c := etcdtest.StartWith(t)
	mgmtWorld(t, c, 60)
	// run runs a snippet and calls act once it has printed something
	// (nodewatch has listed: a change made before would be part of the
	// initial state). With lines > 0, the pipeline never ends by itself:
	// once it has printed that many lines, it is stopped.
	run := func(t *testing.T, snippet string, lines int, act func()) string {
		t.Helper()
		out, done := startSnippet(t, snippet, "PATH="+path, "NODEWATCH_ETCD="+ep)
		waitFor := func(enough func(string) bool) {
			t.Helper()
			testkit.Eventually(t, func() error {
				if enough(out.String()) {
					return nil
				}
				select {
				case err := <-done:
					t.Fatalf("recipe ended (%v):\n%s", err, out)
				default:
				}
				return fmt.Errorf("recipe timed out:\n%s", out)
			})
		}
		waitFor(func(s string) bool { return s != "" })
		act()
		if lines > 0 {
			waitFor(func(s string) bool { return strings.Count(s, "\n") >= lines })
			return out.String()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("recipe failed: %v\n%s", err, out)
			}
		case <-time.After(timeout):
			t.Fatalf("recipe timed out:\n%s", out)
		}
		return out.String()
	}
	put := func(k, v string) { etcdtest.Put(t, c, k, v) }

	t.Run("which hosts export files to h3", func(t *testing.T) {
		out := run(t, recipes[0], 3, func() {
			put("/_mgmt/exported/h3/h4/file//opt/z", string(mgmttest.ResToB64(t, &mgmttest.FileRes{Base: mgmttest.NewBase("file", "/opt/z", "h3"), Path: "/opt/z"})))
		})
		if out != "h1 /tmp/foo\nh1 /srv/x\nh4 /opt/z\n" {
			t.Fatalf("output %q", out)
		}
	})
	t.Run("wait until h3 exported its service", func(t *testing.T) {
		out := run(t, recipes[1], 0, func() {
			put("/_mgmt/exported/*/h3/svc/nginx", string(mgmttest.ResToB64(t, &mgmttest.SvcRes{Base: mgmttest.NewBase("svc", "nginx", "*"), State: "running"})))
		})
		if !strings.Contains(out, "new      /_mgmt/exported/*/h3/svc/nginx  to=* from=h3 kind=svc name=nginx") {
			t.Fatalf("output %q", out)
		}
	})
	t.Run("the scheduler's choice", func(t *testing.T) {
		out := run(t, recipes[2], 2, func() { put("/_mgmt/scheduler/schedule/web", "h2,h3") })
		if out != "h1 h2\nh2 h3\n" {
			t.Fatalf("output %q", out)
		}
	})
}
