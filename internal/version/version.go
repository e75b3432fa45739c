// Package version says which build of nodewatch is running, from the
// build information the Go toolchain records: the module version, the VCS
// commit and time, whether the tree was modified, and the Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Text formats build information, e.g.
//
//	nodewatch v1.2.0
//	commit 9d6cf9f1… (2026-11-22T20:03:43Z, modified)
//	go1.26.8 linux/amd64
func Text(info *debug.BuildInfo, ok bool) string {
	version, rev, at, modified := "unknown", "", "", false
	if ok {
		version = info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodewatch %s\n", version)
	if rev != "" {
		var notes []string
		if at != "" {
			notes = append(notes, at)
		}
		if modified {
			notes = append(notes, "modified")
		}
		fmt.Fprintf(&b, "commit %s", rev)
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
