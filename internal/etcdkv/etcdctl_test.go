package etcdkv

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// etcdctlEnv is what etcdctl watch KEY -- CMD gives CMD for ev, a watch
// response's event at revision rev: the formatting of printWatchCh in
// etcdctl/ctlv3/command/watch_command.go.
func etcdctlEnv(rev int64, ev *mvccpb.Event) []string {
	return []string{
		fmt.Sprintf("ETCD_WATCH_REVISION=%d", rev),
		fmt.Sprintf("ETCD_WATCH_EVENT_TYPE=%q", ev.Type),
		fmt.Sprintf("ETCD_WATCH_KEY=%q", ev.Kv.Key),
		fmt.Sprintf("ETCD_WATCH_VALUE=%q", ev.Kv.Value),
	}
}

// eventLine is the line nodewatch prints for a put of kv (new), or for
// its deletion at rev (deleted, with kv as prev), its object decoded by
// rules.
func eventLine(t *testing.T, rules *Rules, kv *mvccpb.KeyValue, deleted bool, rev int64) []byte {
	t.Helper()
	obj, err := rules.Decoder(nil)(kv)
	if err != nil {
		t.Fatalf("%q: %v", kv.Value, err)
	}
	id, _ := json.Marshal(string(kv.Key)) // a key that is not UTF-8 loses bytes here, not in the object
	doc := obj.(*jsondoc.Doc).JSON()
	if deleted {
		return fmt.Appendf(nil, `{"type":"deleted","id":%s,"prev":%s,"rev":%d}`, id, doc, rev)
	}
	return fmt.Appendf(nil, `{"type":"new","id":%s,"object":%s,"rev":%d}`, id, doc, rev)
}

// TestEtcdctlEnv: the variables of a change are etcdctl's for the same
// event, byte for byte, where the value's decoding can be undone (text,
// base64, auto but for the two cases it cannot tell apart), and the JSON
// the value became where it cannot.
func TestEtcdctlEnv(t *testing.T) {
	pattern, err := ParseKeyPattern("/b64/{name}")
	if err != nil {
		t.Fatal(err)
	}
	rules := &Rules{Default: ValueAuto, Rules: []Rule{{Pattern: pattern, Value: ValueBase64}}}
	for _, c := range []struct {
		mode  ValueMode // the default; keys under /b64/ are base64
		key   string
		value string
		want  string // ETCD_WATCH_VALUE's value if not etcdctl's
	}{
		{ValueAuto, "/a", "plain text", ""},
		{ValueAuto, "/a", "", ""},
		{ValueAuto, "/a", "say \"hi\"\n\ttab", ""},
		{ValueAuto, "/a", "é☃", ""},
		{ValueAuto, "/a", `{"b":[1,2.50,true,null],"a":"x"}`, ""},
		{ValueAuto, "/a", `12345678901234567890123`, ""},
		{ValueAuto, "/a", `"123"`, ""},             // a JSON string whose text is JSON: stored quoted
		{ValueAuto, "/a", `{"base64":"aGk="}`, ""}, // "hi" is UTF-8: not what auto makes of bytes
		{ValueAuto, "/a", "\xff\x00bytes", ""},
		{ValueAuto, "/a\xffkey", "v", ""},
		{ValueAuto, "/a", ` {"a": 1} `, `"{\"a\":1}"`}, // compacted
		{ValueAuto, "/a", `"abc"`, `"abc"`},            // stored quoted, given as the text auto printed
		{ValueText, "/a", "text\x01", ""},
		{ValueJSON, "/a", `{"a":1}`, ""},
		{ValueJSON, "/a", `[1, 2]`, `"[1,2]"`},
		{ValueQuery, "/a", "a=1&b=x", `"{\"a\":\"1\",\"b\":\"x\"}"`},
		{ValueAuto, "/b64/x", "\xff{\"a\": 1}", ""},
		{ValueText, "/b64/y", "", ""},
	} {
		r := *rules
		r.Default = c.mode
		kv := &mvccpb.KeyValue{Key: []byte(c.key), Value: []byte(c.value), CreateRevision: 3, ModRevision: 7, Version: 2}
		env := EtcdctlEnv{Rules: &r}
		want := etcdctlEnv(7, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
		if c.want != "" {
			want[3] = "ETCD_WATCH_VALUE=" + c.want
		}
		if got := env.Env(eventLine(t, &r, kv, false, 7)); !cmp.Equal(want, got) {
			t.Errorf("put of %q = %q under %v: (-etcdctl +got)\n%s", c.key, c.value, c.mode, cmp.Diff(want, got))
		}
		// A deletion has no value, as etcd's event has none.
		want = etcdctlEnv(9, &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: kv.Key, ModRevision: 9}})
		if got := env.Env(eventLine(t, &r, kv, true, 9)); !cmp.Equal(want, got) {
			t.Errorf("deletion of %q: (-etcdctl +got)\n%s", c.key, cmp.Diff(want, got))
		}
	}
	for _, line := range []string{`{"type":"batch_done","batch":1}`, `not JSON`, ``} {
		if got := (EtcdctlEnv{}).Env([]byte(line)); got != nil {
			t.Errorf("Env(%q) = %q, want nil", line, got)
		}
	}
}
