// Package version says which build of nodewatch is running: the version,
// commit and date a release build was stamped with by the linker (make
// build and make release stamp every binary from git, or from the VERSION
// file where there is no git), or else what the Go toolchain recorded (the
// module version of `go install …@v1.2.0`, the VCS commit and time of a
// build in a clone), and the Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker only (-X), never by code: see scripts/version.sh.
var (
	version string // v0.1.0, or v0.1.0-dev+g1a2b3c4d5e6f for a build between releases
	commit  string // the full commit hash
	date    string // the commit's time, RFC 3339 in UTC
)

// Stamp is what a build was stamped with; empty fields were not.
type Stamp struct{ Version, Commit, Date string }

// Linked returns what the linker stamped into this binary.
func Linked() Stamp { return Stamp{version, commit, date} }

// Text formats what is known of the build, e.g.
//
//	nodewatch v1.2.0
//	commit 9d6cf9f1… (2026-11-22T20:03:43Z, modified)
//	go1.26.8 linux/amd64
//
// The stamp wins over the build information; a build with neither a
// stamp nor a module version (go build in a tree without git) is "devel".
func Text(s Stamp, info *debug.BuildInfo, ok bool) string {
	ver, rev, at, modified := s.Version, s.Commit, s.Date, false
	if ok {
		if ver == "" && info.Main.Version != "(devel)" {
			ver = info.Main.Version
		}
		for _, bs := range info.Settings {
			switch {
			case bs.Key == "vcs.revision" && s.Commit == "":
				rev = bs.Value
			case bs.Key == "vcs.time" && s.Date == "":
				at = bs.Value
			case bs.Key == "vcs.modified" && s.Commit == "":
				modified = bs.Value == "true"
			}
		}
	}
	if ver == "" {
		ver = "devel"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodewatch %s\n", ver)
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
