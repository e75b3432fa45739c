package curator

import (
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
)

func TestDecodeHealth(t *testing.T) {
	hb := "2026-11-23T10:00:00.5Z"
	for _, tc := range []struct {
		record  string
		want    mgmtpb.Node_Health
		beat    bool
		wantErr string
	}{
		{record: `{"id":"a"}`},
		{record: "\x0a\x01a"}, // binary
		{record: `{"id":"a","health":"HEALTH_HEALTHY"}`, want: mgmtpb.Node_HEALTH_HEALTHY},
		{record: `{"id":"a","health":"HEARTBEAT_TIMEOUT","heartbeat":"` + hb + `"}`, want: mgmtpb.Node_HEALTH_HEARTBEAT_TIMEOUT, beat: true},
		{record: `{"id":"a","health":1}`, want: mgmtpb.Node_HEALTH_UNKNOWN},
		{record: `{"id":"a","health":null}`},
		{record: `{"id":"a","health":"ill"}`, wantErr: `health "ill": want one of HEALTH_INVALID, HEALTH_UNKNOWN, HEALTH_HEALTHY, HEALTH_HEARTBEAT_TIMEOUT`},
		{record: `{"id":"a","health":7}`, wantErr: "health 7"},
		{record: `{"id":"a","heartbeat":"yesterday"}`, wantErr: `heartbeat "yesterday"`},
		{record: `{"id":"a","health":"HEALTHY","heartbeat":12345}`, wantErr: `heartbeat 12345: want an RFC 3339 time as a string`},
	} {
		h, err := DecodeHealth([]byte(tc.record))
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one saying %q", tc.record, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.record, err)
		case h.Health != tc.want || h.Heartbeat.IsZero() == tc.beat:
			t.Errorf("%s: %+v, want health %v, heartbeat %v", tc.record, h, tc.want, tc.beat)
		}
	}
}
