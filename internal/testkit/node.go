package testkit

import (
	"encoding/json"
	"strings"
	"testing"
)

// NodeJSON is a realistic node as nodewatch prints it (about 700 bytes),
// for benchmarks.
const NodeJSON = `{"clusternet":{"prefixes":[{"cidr":"10.52.247.240/32"},{"cidr":"10.128.1.0/24"}],"wireguard_pubkey":"pO1l6CuVFyoZLMULh7X41AfWc035bRQwOaRgbFkhPl4="},"id":"metropolis-208b1dedfbcc7806c84d62cd892a1740","labels":{"pairs":[{"key":"node.kubernetes.io/instance-type","value":"m1.small"},{"key":"topology.kubernetes.io/zone","value":"zone-a"}]},"roles":{"kubernetes_worker":{}},"state":"NODE_STATE_UP","status":{"boot_id":"uxy4QtbBR27rZolVnnPAGA==","external_address":"10.52.247.240","timestamp":"2026-01-01T00:00:00Z","version":{"git_information":{"build_tree_state":"BUILD_TREE_STATE_CLEAN","commit_hash":"20dbafc1aa57b7f4b4b2ddb1ef376e05fcf1f214"},"release":{"minor":"1","patch":"1"}}}}`

// NodeValue returns NodeJSON decoded as a jq expression sees it (numbers
// as json.Number).
func NodeValue(tb testing.TB) any {
	tb.Helper()
	d := json.NewDecoder(strings.NewReader(NodeJSON))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatal(err)
	}
	return v
}
