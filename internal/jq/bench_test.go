package jq

import (
	"context"
	"testing"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// BenchmarkFilterNode: one --filter evaluation on a node.
func BenchmarkFilterNode(b *testing.B) {
	obj := testkit.NodeValue(b)
	p, err := Compile("--filter", `.state == "NODE_STATE_UP" and (.roles | has("kubernetes_worker"))`, Vars{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if ok, err := p.Truthy(context.Background(), obj); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkEqualsNode: one --equals comparison of two nodes.
func BenchmarkEqualsNode(b *testing.B) {
	obj := testkit.NodeValue(b)
	p, err := Compile("--equals", `.status.external_address`, Vars{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if eq, err := p.Equal(context.Background(), obj, obj); !eq || err != nil {
			b.Fatal(eq, err)
		}
	}
}
