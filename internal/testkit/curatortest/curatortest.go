// Package curatortest is test scaffolding: what the tests of the Curator
// client and server share: node records in a real embedded etcd, a real
// gRPC server on loopback, Watch streams read with timeouts, and a log
// that tests can wait on.
package curatortest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// Node returns a node record with its state and address set.
func Node(id string, state commonpb.NodeState, addr string) *apipb.Node {
	return &apipb.Node{
		Id:     id,
		State:  state,
		Status: &commonpb.NodeStatus{ExternalAddress: addr},
	}
}

// FullNode returns a node with every kind of field set.
func FullNode(id string) *apipb.Node {
	return &apipb.Node{
		Id: id,
		Roles: &commonpb.NodeRoles{
			KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{},
			ConsensusMember: &commonpb.NodeRoles_ConsensusMember{
				CaCertificate: []byte{0xca, 0xfe},
				Peers:         []*commonpb.NodeRoles_ConsensusMember_Peer{{Name: "p", Url: "https://192.0.2.1:7834"}},
			},
		},
		Status: &commonpb.NodeStatus{
			ExternalAddress: "192.0.2.1",
			Timestamp:       timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			RunningCurator:  &commonpb.NodeStatus_RunningCurator{Port: 7835},
			Version: &versionpb.Version{
				Release: &versionpb.Version_Release{Major: 1, Minor: 2, Patch: 3},
				GitInformation: &versionpb.Version_GitInformation{
					CommitHash:          "abc",
					CommitsSinceRelease: 5,
					BuildTreeState:      versionpb.Version_GitInformation_BUILD_TREE_STATE_CLEAN,
				},
			},
			BootId: []byte{1, 2, 3},
		},
		Clusternet: &commonpb.NodeClusterNetworking{
			WireguardPubkey: "key",
			Prefixes:        []*commonpb.NodeClusterNetworking_Prefix{{Cidr: "10.0.0.0/24"}},
		},
		State:  commonpb.NodeState_NODE_STATE_UP,
		Labels: &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "k", Value: "v"}}},
	}
}

// Store is a node record store in a real etcd.
type Store struct {
	t      *testing.T
	Etcd   *clientv3.Client
	URL    string // the client URL of etcd
	Prefix string
}

// NewStore starts an etcd for the test.
func NewStore(t *testing.T) *Store {
	t.Helper()
	url := etcdtest.Start(t)
	return &Store{t: t, Etcd: etcdtest.Client(t, url), URL: url, Prefix: curator.DefaultPrefix}
}

func (s *Store) Put(nodes ...*apipb.Node) {
	s.t.Helper()
	for _, n := range nodes {
		b, err := curator.EncodeRecord(n)
		if err != nil {
			s.t.Fatal(err)
		}
		etcdtest.Put(s.t, s.Etcd, s.Prefix+n.GetId(), string(b))
	}
}

func (s *Store) PutRaw(id, value string) {
	s.t.Helper()
	etcdtest.Put(s.t, s.Etcd, s.Prefix+id, value)
}

func (s *Store) Del(id string) {
	s.t.Helper()
	etcdtest.Delete(s.t, s.Etcd, s.Prefix+id)
}
