package main

import (
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/etcdtest"
	"github.com/nodewatch/nodewatch/internal/mgmttest"
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
	ep := etcdtest.Start(t)
	c := etcdtest.Client(t, ep)
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

// TestKeyPatternMismatch: keys the pattern does not match are printed
// without fields, and the first of them is reported on stderr, once.
func TestKeyPatternMismatch(t *testing.T) {
	t.Parallel()
	ep := etcdtest.Start(t)
	c := etcdtest.Client(t, ep)
	etcdtest.Put(t, c, "/_mgmt/exported/*/h1/file//tmp/foo", "x")
	etcdtest.Put(t, c, "/_mgmt/exported/odd", "y")
	etcdtest.Put(t, c, "/_mgmt/exported/odder", "z")
	stdout, stderr, code := runSync(t, "key", "/_mgmt/exported/", "--prefix", "--etcd", ep, "--key-pattern", exportedPattern, "--once", "-o", "text")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"to=* from=h1 kind=file name=/tmp/foo  \"x\"", "/_mgmt/exported/odd  \"y\"", "/_mgmt/exported/odder  \"z\""} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stderr, "does not match --key-pattern") != 1 || !strings.Contains(stderr, `"/_mgmt/exported/odd"`) {
		t.Errorf("stderr %q: want the first key that does not match, once", stderr)
	}

	_, stderr, code = runSync(t, "key", "/x", "--etcd", ep, "--key-pattern", "/x/{a}/{a}")
	if code != 2 || !strings.Contains(stderr, "--key-pattern") || !strings.Contains(stderr, "named twice") {
		t.Errorf("a bad pattern: exit %d, %q; want 2 naming --key-pattern", code, stderr)
	}
}
