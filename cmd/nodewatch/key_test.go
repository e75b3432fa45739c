//go:build unix

package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestKeyRefusedSaysSoAtOnce: an etcd that refuses connections is one
// line within a second, then exit 3 at --dial-timeout (issue 52); before,
// nothing was said until then.
func TestKeyRefusedSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	refusedSaysSoAtOnce(t, "nodewatch: cannot reach etcd at "+dead+" (connection refused); retrying for up to 3s",
		"nodewatch: etcd unavailable: no etcd reachable at "+dead+" within 3s (last error: ",
		"key", "/x", "--etcd", dead, "--dial-timeout", "3s")
}

func TestKeyOnce(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t,
		"/a/json", `{"state":"up","n":12345678901234567890123}`,
		"/a/text", "hello, world",
		"/a/binary", "\xff\x00\xfe",
		"/a/\xffkey", "binary key",
		"/a/empty", "",
		"/b/outside", "not under the prefix",
	)

	stdout, stderr, code := runSync(t, "key", "--etcd", ep, "--prefix", "/a/", "--once")
	if code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
	}
	golden(t, strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"))
}

// watchKey starts `nodewatch key` and returns it after its initial batch.
func watchKey(t *testing.T, args ...string) (*proc, []string) {
	t.Helper()
	p := start(t, append([]string{"key"}, args...)...)
	return p, p.batch(t)
}

func TestKeyLive(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/a/1", `{"v":1}`)
	p, got := watchKey(t, "--etcd", ep, "--prefix", "/a/")

	etcdtest.Put(t, c, "/a/2", `{"v":1}`) // new
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/a/1", `{"v":2}`) // updated
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/a/1", `{"v":2}`) // identical value: nothing
	p.none(t)
	etcdtest.Delete(t, c, "/a/2") // deleted, with prev
	got = append(got, p.batch(t)...)
	etcdtest.Put(t, c, "/b/1", "outside the prefix")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// One transaction, three keys: one batch.
	if _, err := c.Txn(ctx).Then(
		clientv3.OpPut("/a/3", "three"), clientv3.OpDelete("/a/1"), clientv3.OpPut("/a/0", "zero"),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	got = append(got, p.batch(t)...)
	golden(t, got)
}

func TestKeyValueModes(t *testing.T) {
	t.Parallel()
	ep, _ := etcdtest.StartWith(t,
		"/v/json", `{"a":[1,2.50,"x"]}`,
		"/v/text", `not json`,
		"/v/bin", "\x00\x01\xff",
	)
	for _, mode := range []string{"auto", "json", "text", "base64"} {
		t.Run(mode, func(t *testing.T) {
			stdout, stderr, code := runSync(t, "key", "--etcd", ep, "--prefix", "/v/", "--once", "--value", mode)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			golden(t, append(strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"), "# stderr:", stderr))
		})
	}
}

func TestKeyBadRecordSkipped(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/v/good", `{"ok":true}`)
	p, _ := watchKey(t, "--etcd", ep, "--prefix", "/v/", "--value", "json")
	etcdtest.Put(t, c, "/v/bad", `{"truncated":`)
	etcdtest.Put(t, c, "/v/after", `{"ok":1}`)
	got := p.batch(t)
	if len(got) != 2 || !strings.Contains(got[0], `"id":"/v/after"`) {
		t.Fatalf("want /v/after after the bad record, got %q", got)
	}
	if e := p.stderr.String(); !strings.Contains(e, `"/v/bad"`) || !strings.Contains(e, "not JSON") {
		t.Fatalf("stderr does not report the bad key:\n%s", e)
	}
}

// TestKeyEvalErrorWarns: a jq evaluation error is a warning, and the watch
// goes on (what --strict makes of it: testdata/cli/key.txtar).
func TestKeyEvalErrorWarns(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/v/str", `"a string"`, "/v/obj", `{"up":true}`)
	p, got := watchKey(t, "--etcd", ep, "--prefix", "/v/", "--filter", ".value.up")
	if len(got) != 2 || !strings.Contains(got[0], `"id":"/v/obj"`) {
		t.Fatalf("initial batch: want only /v/obj, got %q", got)
	}
	if e := p.stderr.String(); !strings.Contains(e, `"/v/str": --filter: expected an object but got: string`) {
		t.Fatalf("stderr has no warning naming --filter:\n%s", e)
	}
	etcdtest.Put(t, c, "/v/later", `{"up":true}`) // the watch goes on
	if b := p.batch(t); !strings.Contains(b[0], `"id":"/v/later"`) {
		t.Fatalf("after the warning: got %q", b)
	}
}

// TestKeyCompaction cuts the watcher off from etcd while keys are created,
// changed and deleted, compacts the history it would need to catch up, and
// lets it back: it must list again and print exactly the differences.
func TestKeyCompaction(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	proxy := etcdtest.NewProxy(t, ep)
	etcdtest.Put(t, c, "/n/keep", "same")
	etcdtest.Put(t, c, "/n/change", "before")
	etcdtest.Put(t, c, "/n/delete", "doomed")
	etcdtest.Put(t, c, "/n/flap", "1")
	p, got := watchKey(t, "--etcd", proxy.Endpoint, "--prefix", "/n/")

	proxy.Cut()
	etcdtest.Put(t, c, "/n/change", "after")
	etcdtest.Delete(t, c, "/n/delete")
	etcdtest.Put(t, c, "/n/create", "born while cut off")
	etcdtest.Delete(t, c, "/n/flap")
	etcdtest.Put(t, c, "/n/flap", "1") // deleted and re-created with the same value
	etcdtest.Put(t, c, "/n/keep", "same")
	rev := etcdtest.Put(t, c, "/other", "x")
	etcdtest.Compact(t, c, rev)
	p.none(t)
	proxy.Restore()

	got = append(got, p.batch(t)...)
	golden(t, got)
	if e := p.stderr.String(); !strings.Contains(e, "compacted") {
		t.Errorf("stderr does not mention the compaction:\n%s", e)
	}
}

// TestKeyResyncKeepsBadRecord: a record that turns undecodable while the
// watcher is cut off is reported and keeps its last printed state through
// the resync; it is not printed as deleted.
func TestKeyResyncKeepsBadRecord(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	proxy := etcdtest.NewProxy(t, ep)
	etcdtest.Put(t, c, "/n/a", `{"ok":1}`)
	etcdtest.Put(t, c, "/n/b", `{"ok":2}`)
	p, _ := watchKey(t, "--etcd", proxy.Endpoint, "--prefix", "/n/", "--value", "json")

	proxy.Cut()
	etcdtest.Put(t, c, "/n/a", `{"truncated":`)
	rev := etcdtest.Delete(t, c, "/n/b")
	etcdtest.Compact(t, c, rev)
	proxy.Restore()

	got := p.batch(t)
	if len(got) != 2 || !strings.HasPrefix(got[0], `{"type":"deleted","id":"/n/b"`) || !strings.Contains(got[1], `"cause":"resync"`) {
		t.Fatalf("resync batch %q; want only /n/b deleted", got)
	}
	if e := p.stderr.String(); !strings.Contains(e, `skipping "/n/a"`) {
		t.Errorf("stderr does not report the bad record:\n%s", e)
	}
	etcdtest.Put(t, c, "/n/a", `{"ok":3}`) // fixed: an update from the last good state
	if got := p.batch(t); !strings.Contains(got[0], `"type":"updated","id":"/n/a"`) || !strings.Contains(got[0], `"prev":{"create_revision":2`) {
		t.Fatalf("after the fix: %q", got)
	}
}

// TestKeyClusterFailover: `key` against a 3-member etcd cluster keeps
// following while each member in turn is killed (the leader among them,
// whichever it is) and restarted: every change arrives once, in order, as
// a plain change (no resync needed while history exists).
func TestKeyClusterFailover(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.StartCluster(t, 3)
	eps := strings.Join(cluster.Endpoints, ",")
	c := etcdtest.Client(t, eps)
	etcdtest.Put(t, c, "/f/a", "0")
	p, _ := watchKey(t, "--etcd", eps, "--prefix", "/f/")

	for i := range cluster.Endpoints {
		cluster.Kill(i)
		want := strconv.Itoa(i + 1)
		etcdtest.PutRetrying(t, c, "/f/a", want)
		got := p.batch(t)
		if len(got) != 2 || !strings.Contains(got[0], `"type":"updated"`) || !strings.Contains(got[0], `"value":`+want+`,`) ||
			!strings.Contains(got[1], `"cause":"change"`) {
			t.Fatalf("with member %d down: %q, want the update to %s", i, got, want)
		}
		cluster.Restart(i)
	}
}

// stalledWriter is a reader that stops reading until a given moment:
// every write waits for it. It records when the first write began.
type stalledWriter struct {
	until time.Time
	mu    sync.Mutex // guards first
	first time.Time
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
	w.mu.Unlock()
	time.Sleep(time.Until(w.until))
	return len(p), nil
}

func (w *stalledWriter) firstWrite() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// TestKeyCountMetBeforeTimeout: --count reached, its output still being
// written when --timeout passes: the goal was met, exit 0, not 124.
//
// The first write is the flush of the lines that met the goal. If it
// began before the --timeout could pass (measured from before run), the
// goal was met first; the writer holds it until a little after the
// --timeout (well within the grace a blocked write gets), so the timeout
// passes while it is written.
func TestKeyCountMetBeforeTimeout(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t)
	for _, k := range []string{"/s/a", "/s/b", "/s/c"} {
		etcdtest.Put(t, c, k, "1")
	}
	growing(t, func(d time.Duration) bool {
		var stderr strings.Builder
		start := time.Now()
		w := &stalledWriter{until: start.Add(d + 300*time.Millisecond)}
		code := run(context.Background(), []string{"key", "--etcd", ep, "--prefix", "/s/", "--count", "2", "--timeout", d.String()},
			strings.NewReader(""), w, &stderr)
		if first := w.firstWrite(); first.IsZero() || !first.Before(start.Add(d)) {
			return false // listing took longer than the --timeout
		}
		if code != 0 {
			t.Fatalf("exit %d, stderr %q; want 0: the count was met", code, stderr.String())
		}
		return true
	})
}
