package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestText(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-22T20:03:43Z"}, {Key: "vcs.modified", Value: "true"},
	}
	goLine := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	stamp := Stamp{"v0.1.0", "fedcba", "2026-11-28T10:00:00Z"}
	for _, c := range []struct {
		name  string
		stamp Stamp
		info  *debug.BuildInfo
		ok    bool
		want  string
	}{
		{"go install @version in a clone", Stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: vcs}, true,
			"nodewatch v1.2.0\ncommit abc123 (2026-11-22T20:03:43Z, modified)\n" + goLine},
		{"go install @version", Stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, true, "nodewatch v1.2.0\n" + goLine},
		{"go build in a clone", Stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			"nodewatch devel\ncommit abc123 (2026-11-22T20:03:43Z, modified)\n" + goLine},
		{"go build, no git", Stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "nodewatch devel\n" + goLine},
		{"no build information", Stamp{}, nil, false, "nodewatch devel\n" + goLine},
		{"stamped wins over build information", stamp, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			"nodewatch v0.1.0\ncommit fedcba (2026-11-28T10:00:00Z)\n" + goLine},
		{"stamped without a commit (no git)", Stamp{Version: "v0.1.0", Date: "2026-11-28T10:00:00Z"}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true,
			"nodewatch v0.1.0\n" + goLine},
	} {
		if got := Text(c.stamp, c.info, c.ok); got != c.want {
			t.Errorf("%s: Text = %q, want %q", c.name, got, c.want)
		}
	}
}
