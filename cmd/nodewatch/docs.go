package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/version"
)

// appDescription is the man page's DESCRIPTION.
var appDescription = `nodewatch opens a watch on cluster state (keys in etcd, or the nodes of a Monogon
Metropolis cluster through its Curator) and prints every change as newline-delimited JSON:
new, updated (with the paths that changed), deleted, and batch_done at the end of each batch.
jq expressions decide which objects are of interest (--filter), which changes count
(--equals) and when to stop (--until).

` + exitCodesBrief()

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
			_, err := fmt.Fprint(e.stdout, version.Text(debug.ReadBuildInfo()))
			return err
		},
	}
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
