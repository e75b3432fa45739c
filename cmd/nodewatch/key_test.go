package main

import (
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/etcdtest"
)

func TestKeyOnce(t *testing.T) {
	ep := etcdtest.Start(t)
	c := etcdtest.Client(t, ep)
	etcdtest.Put(t, c, "/a/json", `{"state":"up","n":12345678901234567890123}`)
	etcdtest.Put(t, c, "/a/text", "hello, world")
	etcdtest.Put(t, c, "/a/binary", "\xff\x00\xfe")
	etcdtest.Put(t, c, "/a/\xffkey", "binary key")
	etcdtest.Put(t, c, "/a/empty", "")
	etcdtest.Put(t, c, "/b/outside", "not under the prefix")

	stdout, stderr, code := runSync(t, "key", "--etcd", ep, "--prefix", "/a/", "--once")
	if code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
	}
	golden(t, strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"))
}
