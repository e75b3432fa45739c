package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// withHealth returns n's JSON record with extra top-level members added
// (`"health":"HEALTHY"`, …), as a writer of records with health makes it.
func withHealth(t *testing.T, n *apipb.Node, members string) string {
	t.Helper()
	b, err := curator.EncodeRecord(n)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "}") + "," + members + "}"
}

// getNodes calls GetNodes and returns every node it streams.
func getNodes(t *testing.T, conn *grpc.ClientConn, filter string) ([]*mgmtpb.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	st, err := mgmtpb.NewManagementClient(conn).GetNodes(ctx, &mgmtpb.GetNodesRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	var out []*mgmtpb.Node
	for {
		n, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, n)
	}
}

// TestServerGetNodes: GetNodes streams every node with the health its
// record carries (HEALTH_UNKNOWN when none, time_since_heartbeat from the
// record's heartbeat); a record whose health changes shows in GetNodes
// and sends nothing on Watch, which has no health.
func TestServerGetNodes(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	lg := curatortest.NewLogs(t)
	hb := time.Now().Add(-3 * time.Second).UTC()
	n1 := curatortest.FullNode("n1")
	st.PutRaw("n1", withHealth(t, n1, `"health":"HEALTHY","heartbeat":"`+hb.Format(time.RFC3339Nano)+`"`))
	st.Put(curatortest.Node("n2", up, "10.0.0.2"))
	st.PutRaw("n3", withHealth(t, curatortest.Node("n3", up, "10.0.0.3"), `"health":"SICK"`))
	_, g := serveStore(t, st, lg)
	lg.WaitFor("key=/nodes/n3 ", "health", "SICK", "taken as unknown")
	conn := curatortest.Dial(t, g.Addr)
	w := curatortest.Watch(t, conn, curatortest.NodesReq())
	w.Next() // the backlog

	got, err := getNodes(t, conn, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []*mgmtpb.Node{
		{Id: "n1", State: n1.State, Status: n1.Status, Roles: n1.Roles, Labels: n1.Labels, Health: mgmtpb.Node_HEALTH_HEALTHY},
		{Id: "n2", State: up, Status: curatortest.Node("n2", up, "10.0.0.2").Status, Health: mgmtpb.Node_HEALTH_UNKNOWN},
		{Id: "n3", State: up, Status: curatortest.Node("n3", up, "10.0.0.3").Status, Health: mgmtpb.Node_HEALTH_UNKNOWN},
	}
	if len(got) != 3 {
		t.Fatalf("GetNodes: %d nodes, want 3: %v", len(got), got)
	}
	since := got[0].GetTimeSinceHeartbeat().AsDuration()
	if since < 3*time.Second || since > 3*time.Second+testkit.Timeout {
		t.Errorf("n1 time_since_heartbeat %v, want 3s or a little more", since)
	}
	got[0].TimeSinceHeartbeat = nil
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("GetNodes (-want +got):\n%s", diff)
	}

	// Only n1's health changes: GetNodes shows it; Watch sends nothing
	// for it, so the next Watch event is n2's change written after it.
	st.PutRaw("n1", withHealth(t, n1, `"health":3`))
	testkit.Eventually(t, func() error {
		got, err := getNodes(t, conn, "")
		if err != nil {
			t.Fatal(err)
		}
		if h := got[0].GetHealth(); h != mgmtpb.Node_HEALTH_HEARTBEAT_TIMEOUT {
			return fmt.Errorf("n1's health still %v", h)
		}
		if got[0].TimeSinceHeartbeat != nil {
			t.Errorf("n1: time_since_heartbeat %v with no heartbeat in its record", got[0].TimeSinceHeartbeat)
		}
		return nil
	})
	st.Put(curatortest.Node("n2", up, "10.0.0.22"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n2", up, "10.0.0.22")), w.Next())

	if _, err := getNodes(t, conn, "node.state == NODE_STATE_UP"); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetNodes with a filter: %v, want Unimplemented", err)
	}
}
