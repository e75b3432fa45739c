package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// Exit codes as each command's --help ends with them (exit.go maps
// errors to them; docs/reference.md explains each).
const (
	watchExitCodes = `EXIT CODES:
   0     goal met (--once, --until, --count); --timeout passed with no goal set; stdout closed
   1     runtime failure: refused by the server, --strict jq error, output error
   2     usage: bad flag, argument or jq expression; unreadable TLS file
   3     no connection within --dial-timeout, or --timeout passed before the initial state
   124   --timeout passed with the goal unmet
   130   interrupted (SIGINT, SIGTERM)
`
	serveExitCodes = `EXIT CODES:
   1     runtime failure: cannot listen, refused by etcd
   2     usage: bad flag; unreadable or mismatched TLS file; plaintext on a non-loopback address without --insecure
   3     etcd not reached within --dial-timeout
   130   stopped by SIGINT or SIGTERM (the normal end)
`
	simExitCodes = `EXIT CODES:
   0     --duration or --steps reached
   1     runtime failure: refused by etcd
   2     usage: bad flag
   3     etcd not reached within --dial-timeout
   130   interrupted (SIGINT, SIGTERM)
`
	plainExitCodes = `EXIT CODES:
   0     done
   2     usage: bad argument
`
)

// exitCodes are the EXIT CODES sections of the commands' --help.
var exitCodes = map[string]string{
	"nodes": watchExitCodes, "node": watchExitCodes, "key": watchExitCodes,
	"serve": serveExitCodes, "sim": simExitCodes,
	"completion": plainExitCodes, "version": plainExitCodes,
}

// appDescription is the man page's DESCRIPTION.
const appDescription = `nodewatch opens a watch on cluster state (keys in etcd, or the nodes of a Monogon
Metropolis cluster through its Curator) and prints every change as newline-delimited JSON:
new, updated (with the paths that changed), deleted, and batch_done at the end of each batch.
jq expressions decide which objects are of interest (--filter), which changes count
(--equals) and when to stop (--until).

Exit codes of the watching commands (nodes, node, key): 0 goal met (--once, --until,
--count), --timeout passed with no goal set, or stdout closed; 1 runtime failure; 2 usage
error (bad flag, argument or jq expression); 3 no connection within --dial-timeout; 124
--timeout passed with the goal unmet; 130 interrupted. serve and sim end with 130 when
stopped by a signal. Each command's --help lists its own.`

// versionCommand prints what build this is, from the build information
// the Go toolchain records: the module version, the VCS commit and time,
// whether the tree was modified, and the Go version.
func versionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print nodewatch's version, commit and Go version",
		Description: `Examples:
   nodewatch version`,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("version takes no arguments")
			}
			_, err := fmt.Fprint(e.stdout, versionText(debug.ReadBuildInfo()))
			return err
		},
	}
}

// versionText formats build information, e.g.
//
//	nodewatch v1.2.0
//	commit 9d6cf9f1… (2026-11-22T20:03:43Z, modified)
//	go1.26.8 linux/amd64
func versionText(info *debug.BuildInfo, ok bool) string {
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

// manCommand prints nodewatch's man page (section 1), generated from the
// command-line definition; `make generate` writes it to docs/nodewatch.1.
func manCommand(e *env, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			page, err := app().ToManWithSection(1)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, page)
			return err
		},
	}
}
