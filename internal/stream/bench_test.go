package stream

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/nodeset"
)

// nodeText is a realistic node as nodewatch prints it (about 700 bytes).
const nodeText = `{"clusternet":{"prefixes":[{"cidr":"10.52.247.240/32"},{"cidr":"10.128.1.0/24"}],"wireguard_pubkey":"pO1l6CuVFyoZLMULh7X41AfWc035bRQwOaRgbFkhPl4="},"id":"metropolis-208b1dedfbcc7806c84d62cd892a1740","labels":{"pairs":[{"key":"node.kubernetes.io/instance-type","value":"m1.small"},{"key":"topology.kubernetes.io/zone","value":"zone-a"}]},"roles":{"kubernetes_worker":{}},"state":"NODE_STATE_UP","status":{"boot_id":"uxy4QtbBR27rZolVnnPAGA==","external_address":"10.52.247.240","timestamp":"2026-01-01T00:00:00Z","version":{"git_information":{"build_tree_state":"BUILD_TREE_STATE_CLEAN","commit_hash":"20dbafc1aa57b7f4b4b2ddb1ef376e05fcf1f214"},"release":{"minor":"1","patch":"1"}}}}`

// nodeObject is nodeText decoded, as a jq expression sees it.
func nodeObject(b *testing.B) any {
	d := json.NewDecoder(strings.NewReader(nodeText))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkEncodeUpdated: one `updated` line (object and prev) for a node,
// as the sources hand nodes over: a jsondoc.Doc, printed as its bytes.
func BenchmarkEncodeUpdated(b *testing.B) {
	benchmarkEncodeUpdated(b, jsondoc.New([]byte(nodeText)))
}

// BenchmarkEncodeUpdatedTree: the same line from a decoded tree, encoded
// as gojq does (how every object was printed before jsondoc.Doc).
func BenchmarkEncodeUpdatedTree(b *testing.B) {
	benchmarkEncodeUpdated(b, nodeObject(b))
}

func benchmarkEncodeUpdated(b *testing.B, obj any) {
	e := NewEncoder(io.Discard, Options{})
	// prev differs from obj in one field, as most updates of a node do.
	prevText := strings.Replace(nodeText, `"10.52.247.240"`, `"10.52.247.241"`, 1)
	var prev any = jsondoc.New([]byte(prevText))
	if _, isDoc := obj.(*jsondoc.Doc); !isDoc {
		prev, _ = jsondoc.Decode([]byte(prevText))
	}
	ev := nodeset.Event{Type: nodeset.Updated, ID: "metropolis-208b1dedfbcc7806c84d62cd892a1740", Object: obj, Prev: prev}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := e.Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}
