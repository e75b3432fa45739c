package curator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
)

// Health is what a node record says of its node's health, beyond the
// Node message: the Watch wire has no health; Management.GetNodes does.
type Health struct {
	// Health is the record's health; HEALTH_INVALID when the record has
	// none (GetNodes answers HEALTH_UNKNOWN then).
	Health mgmtpb.Node_Health
	// Heartbeat is when the node last sent a heartbeat; zero when the
	// record does not say.
	Heartbeat time.Time
}

// DecodeHealth reads the health a node record carries besides its Node
// message: in a JSON record, the top-level members
//
//	"health":    "HEALTH_HEALTHY" (or "HEALTHY", or the enum's number)
//	"heartbeat": "2026-11-23T10:00:00Z" (RFC 3339: the last heartbeat)
//
// which DecodeRecord ignores. A binary record, or a JSON record without
// them, has no health (the zero Health). A member that is present but not
// understood is an error, naming it, with the zero Health.
func DecodeHealth(value []byte) (Health, error) {
	var h Health
	t := bytes.TrimLeft(value, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(`"h`)) {
		return h, nil // binary, or no member that could be ours
	}
	var rec struct {
		Health    json.RawMessage `json:"health"`
		Heartbeat json.RawMessage `json:"heartbeat"`
	}
	if err := json.Unmarshal(t, &rec); err != nil {
		return h, nil // not JSON after all: DecodeRecord decides
	}
	if len(rec.Health) > 0 && string(rec.Health) != "null" {
		v, err := parseHealth(rec.Health)
		if err != nil {
			return Health{}, err
		}
		h.Health = v
	}
	if len(rec.Heartbeat) > 0 && string(rec.Heartbeat) != "null" {
		var text string
		err := json.Unmarshal(rec.Heartbeat, &text)
		if err == nil {
			h.Heartbeat, err = time.Parse(time.RFC3339Nano, text)
		}
		if err != nil {
			return Health{}, fmt.Errorf("node record: heartbeat %s: want an RFC 3339 time as a string", rec.Heartbeat)
		}
	}
	return h, nil
}

// parseHealth reads a health value: the enum's name, with or without its
// HEALTH_ prefix, or its number.
func parseHealth(raw json.RawMessage) (mgmtpb.Node_Health, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if v, ok := mgmtpb.Node_Health_value[name]; ok {
			return mgmtpb.Node_Health(v), nil
		}
		if v, ok := mgmtpb.Node_Health_value["HEALTH_"+name]; ok {
			return mgmtpb.Node_Health(v), nil
		}
	} else if n, err := strconv.ParseInt(string(raw), 10, 32); err == nil {
		if _, ok := mgmtpb.Node_Health_name[int32(n)]; ok {
			return mgmtpb.Node_Health(n), nil
		}
	}
	names := make([]string, 0, len(mgmtpb.Node_Health_name))
	for i := range int32(len(mgmtpb.Node_Health_name)) {
		names = append(names, mgmtpb.Node_Health_name[i])
	}
	return 0, fmt.Errorf("node record: health %s: want one of %s", raw, strings.Join(names, ", "))
}
