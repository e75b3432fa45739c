//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// changes follows one watch as NDJSON and one as -o text, makes each
// change with step and waits for the NDJSON watch to print it. -o text
// prints no batch line after a single change, so its lines are read at
// the end, up to the line of end: one more object, named endMark, which
// the lines leave out. It returns the NDJSON lines, then "# -o text" and
// the text lines without their time.
type changes struct {
	json, text *proc
	got, texts []string
	end        func()
}

const endMark = "zz-end"

func followChanges(t *testing.T, end func(), args ...string) *changes {
	t.Helper()
	c := &changes{json: start(t, args...), text: start(t, append(args, "-o", "text")...), end: end}
	c.json.batch(t)
	c.textLines(t)
	return c
}

// textLines reads the -o text lines, without their time, up to the next
// batch line, or up to the end mark's line (left out).
func (c *changes) textLines(t *testing.T) {
	t.Helper()
	for {
		l := c.text.next(t)
		if len(l) > 9 && l[2] == ':' && l[5] == ':' {
			l = l[9:] // "15:04:05 "
		}
		if strings.Contains(l, endMark) {
			return
		}
		c.texts = append(c.texts, l)
		if strings.HasPrefix(l, "batch ") {
			return
		}
	}
}

func (c *changes) step(t *testing.T, change func()) {
	t.Helper()
	change()
	c.got = append(c.got, c.json.batch(t)...)
}

func (c *changes) golden(t *testing.T) {
	t.Helper()
	c.end()
	c.textLines(t)
	golden(t, append(append(c.got, "# -o text"), c.texts...))
}

// TestKeyChanged: what each kind of change to a value is named in
// "changed", and how -o text shows it.
func TestKeyChanged(t *testing.T) {
	t.Parallel()
	ep, cl := etcdtest.StartWith(t,
		"/c/json", `{"a":{"b":1,"c":"same"},"list":[1,2],"gone":true}`,
		"/c/text", "hello",
		"/c/binary", "\xff\x00",
	)
	end := func() { etcdtest.Put(t, cl, "/c/"+endMark, "1") }
	c := followChanges(t, end, "key", "--etcd", ep, "--prefix", "/c/")
	put := func(k, v string) func() { return func() { etcdtest.Put(t, cl, k, v) } }
	c.step(t, put("/c/json", `{"a":{"b":2,"c":"same"},"list":[1,2],"gone":true}`))             // nested
	c.step(t, put("/c/json", `{"a":{"b":2,"c":"same"},"list":[1,3],"gone":true}`))             // an element
	c.step(t, put("/c/json", `{"a":{"b":2,"c":"same"},"list":[1,3,4],"gone":true}`))           // a longer list
	c.step(t, put("/c/json", `{"a":{"b":2,"c":"same"},"list":[1,3,4],"new":{"k":"v"}}`))       // added, removed
	c.step(t, put("/c/json", `{"list":[1,3,4],"new":{"k":"v"},"a":{"c":"same","b":2},"x":0}`)) // reordered, one added
	c.step(t, put("/c/json", `42`))                                                            // no longer an object
	c.step(t, put("/c/text", "hello, world"))                                                  // text
	c.step(t, put("/c/binary", "\xff\x01"))                                                    // binary
	c.golden(t)
}

// TestNodesChanged: the same for nodes, through serve and the Curator
// wire.
func TestNodesChanged(t *testing.T) {
	t.Parallel()
	ep, cl := etcdtest.StartWith(t)
	n := node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1")
	n.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "zone", Value: "a"}}}
	putNode(t, cl, n)
	addr, _ := serve(t, ep)
	end := func() { putNode(t, cl, node(endMark, commonpb.NodeState_NODE_STATE_NEW, "")) }
	c := followChanges(t, end, "nodes", "--curator", addr)
	change := func(edit func(n *apipb.Node)) func() {
		return func() {
			edit(n)
			putNode(t, cl, n)
		}
	}
	c.step(t, change(func(n *apipb.Node) { n.Status.ExternalAddress = "10.0.0.2" }))
	c.step(t, change(func(n *apipb.Node) { n.Roles.KubernetesWorker = &commonpb.NodeRoles_KubernetesWorker{} }))
	c.step(t, change(func(n *apipb.Node) { n.Labels.Pairs[0].Value = "b" }))
	c.step(t, change(func(n *apipb.Node) {
		n.Labels.Pairs = append(n.Labels.Pairs, &commonpb.NodeLabels_Pair{Key: "rack", Value: "r1"})
	}))
	c.step(t, change(func(n *apipb.Node) {
		n.State = commonpb.NodeState_NODE_STATE_DECOMMISSIONED
		n.Roles.KubernetesWorker = nil
		n.Status = nil
	}))
	c.golden(t)
}
