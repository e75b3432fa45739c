package jq

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
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

// BenchmarkFilterNode: one --filter evaluation on a node.
func BenchmarkFilterNode(b *testing.B) {
	obj := nodeObject(b)
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
	obj := nodeObject(b)
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
