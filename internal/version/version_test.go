package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestText(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-22T20:03:43Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	goLine := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, c := range []struct {
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{info, true, "nodewatch v1.2.0\ncommit abc123 (2026-11-22T20:03:43Z, modified)\n" + goLine},
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, true, "nodewatch v1.2.0\n" + goLine},
		{nil, false, "nodewatch unknown\n" + goLine},
	} {
		if got := Text(c.info, c.ok); got != c.want {
			t.Errorf("Text = %q, want %q", got, c.want)
		}
	}
}
