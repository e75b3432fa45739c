package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"

	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/version"
)

// versionCommand prints what build this is, from the build information
// the Go toolchain records: the module version, the VCS commit and time,
// whether the tree was modified, and the Go version.
func versionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "print nodewatch's version, commit and Go version",
		Description: docs.Help("version"),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cmdline.Usagef("version takes no arguments")
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
