package devfleet

import (
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
)

// TestHeartbeats: over simulated rounds every node is healthy but the one
// in an outage, which turns HEALTH_HEARTBEAT_TIMEOUT once its last
// heartbeat is older than HeartbeatTimeout and comes back after the
// outage; the annotated records decode as serve reads them.
func TestHeartbeats(t *testing.T) {
	h := newHeartbeats("/nodes/", 1)
	ids := []string{"a", "b", "c"}
	rec, err := curator.EncodeRecord(&apipb.Node{Id: "a"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	outages, timeouts := 0, 0
	for round := 0; round < 2000; round++ {
		wasDown := h.down
		h.beat(ids, now)
		if h.down != "" && h.down != wasDown {
			outages++
		}
		for _, id := range ids {
			v := h.annotate("/nodes/"+id, rec, now)
			got, err := curator.DecodeHealth(v)
			if err != nil {
				t.Fatalf("round %d: %s: %v in %s", round, id, err, v)
			}
			silent := now.Sub(got.Heartbeat)
			want := mgmtpb.Node_HEALTH_HEALTHY
			if silent > HeartbeatTimeout {
				want = mgmtpb.Node_HEALTH_HEARTBEAT_TIMEOUT
				timeouts++
			}
			switch {
			case got.Health != want:
				t.Fatalf("round %d: %s: health %v, heartbeat %v ago", round, id, got.Health, silent)
			case id != h.down && silent != 0:
				t.Fatalf("round %d: %s is not down, but its last heartbeat is %v old", round, id, silent)
			case silent > outage+HeartbeatPeriod:
				t.Fatalf("round %d: %s: no heartbeat for %v, longer than an outage", round, id, silent)
			}
		}
		if _, err := curator.DecodeRecord("a", h.annotate("/nodes/a", rec, now)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(HeartbeatPeriod)
	}
	// 2000 rounds of 2s: about 90 outages expected.
	if outages < 20 || timeouts == 0 {
		t.Fatalf("%d outages, %d timed-out healths in 2000 rounds", outages, timeouts)
	}
	h.beat([]string{"b"}, now) // a and c are gone
	if len(h.last) != 1 {
		t.Errorf("after a round with b alone, heartbeats are kept for %v", h.last)
	}
	if v := h.annotate("/other/a", rec, now); string(v) != string(rec) {
		t.Fatalf("a key outside the prefix was annotated: %s", v)
	}
}
