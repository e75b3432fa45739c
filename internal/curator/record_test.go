package curator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

func TestDecodeRecord(t *testing.T) {
	full := curatortest.FullNode("n1")
	binary, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := curator.EncodeRecord(full)
	if err != nil {
		t.Fatal(err)
	}
	// A binary record whose id is 123 bytes long starts with 0x0a 0x7b:
	// "\n{", which looks like JSON.
	long := curatortest.Node(strings.Repeat("x", 123), commonpb.NodeState_NODE_STATE_UP, "")
	longBinary, err := proto.Marshal(long)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      string
		value   []byte
		want    *apipb.Node
		wantErr bool
	}{
		{name: "EncodeRecord's JSON", id: "n1", value: encoded, want: full},
		{name: "binary", id: "n1", value: binary, want: full},
		{name: "JSON, proto names, leading space", id: "n1", value: []byte(` {"id":"n1","state":"NODE_STATE_UP","status":{"external_address":"a"}}`),
			want: curatortest.Node("n1", commonpb.NodeState_NODE_STATE_UP, "a")},
		{name: "JSON, lowerCamelCase names, enum by number", id: "n1", value: []byte(`{"id":"n1","state":3,"status":{"externalAddress":"a"}}`),
			want: curatortest.Node("n1", commonpb.NodeState_NODE_STATE_UP, "a")},
		{name: "JSON, unknown field ignored", id: "n1", value: []byte(`{"id":"n1","future":1}`), want: &apipb.Node{Id: "n1"}},
		{name: "binary that starts like JSON", id: long.Id, value: longBinary, want: long},
		{name: "id differs from the key's", id: "n2", value: encoded, wantErr: true},
		{name: "no id", id: "n1", value: []byte(`{"state":"NODE_STATE_UP"}`), wantErr: true},
		{name: "empty value", id: "n1", value: nil, wantErr: true},
		{name: "garbage", id: "n1", value: []byte("\xff\xfe not a record"), wantErr: true},
		{name: "broken JSON", id: "n1", value: []byte(`{"id":"n1",`), wantErr: true},
		{name: "JSON of the wrong shape", id: "n1", value: []byte(`{"id":"n1","labels":"k=v"}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := curator.DecodeRecord(tt.id, tt.value)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("DecodeRecord = %v, want an error", got)
				}
				t.Logf("error (as wanted): %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("DecodeRecord (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObject(t *testing.T) {
	tests := []struct {
		name string
		node *apipb.Node
		want map[string]any
	}{{
		name: "every field: proto names, enums by name, 64-bit as strings, bytes as base64",
		node: curatortest.FullNode("n1"),
		want: map[string]any{
			"id": "n1",
			"roles": map[string]any{
				"kubernetes_worker": map[string]any{},
				"consensus_member": map[string]any{
					"ca_certificate": "yv4=",
					"peers":          []any{map[string]any{"name": "p", "url": "https://192.0.2.1:7834"}},
				},
			},
			"status": map[string]any{
				"external_address": "192.0.2.1",
				"timestamp":        "2026-01-02T03:04:05Z",
				"running_curator":  map[string]any{"port": json.Number("7835")},
				"version": map[string]any{
					"release": map[string]any{"major": "1", "minor": "2", "patch": "3"},
					"git_information": map[string]any{
						"commit_hash":           "abc",
						"commits_since_release": "5",
						"build_tree_state":      "BUILD_TREE_STATE_CLEAN",
					},
				},
				"boot_id": "AQID",
			},
			"clusternet": map[string]any{
				"wireguard_pubkey": "key",
				"prefixes":         []any{map[string]any{"cidr": "10.0.0.0/24"}},
			},
			"state":  "NODE_STATE_UP",
			"labels": map[string]any{"pairs": []any{map[string]any{"key": "k", "value": "v"}}},
		},
	}, {
		name: "unpopulated fields are left out",
		node: &apipb.Node{Id: "n2"},
		want: map[string]any{"id": "n2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := curator.Object(tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Tree()); diff != "" {
				t.Errorf("Object (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncodeRecordRoundTrip: what EncodeRecord writes, DecodeRecord reads
// back unchanged, and it uses the proto field names.
func TestEncodeRecordRoundTrip(t *testing.T) {
	n := curatortest.FullNode("metropolis-0123456789abcdef0123456789abcdef")
	b, err := curator.EncodeRecord(n)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("EncodeRecord wrote no JSON: %v", err)
	}
	if _, ok := raw["status"].(map[string]any)["external_address"]; !ok {
		t.Errorf("EncodeRecord = %s, want proto field names", b)
	}
	got, err := curator.DecodeRecord(n.Id, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(n, got, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
