package stream

import (
	"io"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// BenchmarkEncodeUpdated: one `updated` line (object and prev) for a node,
// as the sources hand nodes over: a jsondoc.Doc, printed as its bytes.
func BenchmarkEncodeUpdated(b *testing.B) {
	benchmarkEncodeUpdated(b, jsondoc.New([]byte(testkit.NodeJSON)))
}

// BenchmarkEncodeUpdatedTree: the same line from a decoded tree, encoded
// as gojq does (how every object was printed before jsondoc.Doc).
func BenchmarkEncodeUpdatedTree(b *testing.B) {
	benchmarkEncodeUpdated(b, testkit.NodeValue(b))
}

func benchmarkEncodeUpdated(b *testing.B, obj any) {
	e := NewEncoder(io.Discard, Options{})
	// prev differs from obj in one field, as most updates of a node do.
	prevText := strings.Replace(testkit.NodeJSON, `"10.52.247.240"`, `"10.52.247.241"`, 1)
	var prev any = jsondoc.New([]byte(prevText))
	if _, isDoc := obj.(*jsondoc.Doc); !isDoc {
		prev, _ = jsondoc.Decode([]byte(prevText))
	}
	ev := flow.Event{Type: flow.Updated, ID: "metropolis-208b1dedfbcc7806c84d62cd892a1740", Object: obj, Prev: prev}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := e.Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}
