package main

import (
	"fmt"
	"runtime/debug"
	"strings"

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
			_, err := fmt.Fprint(e.stdout, cmdline.Man(app(),
				cmdline.ManSection{Title: "EXIT STATUS", Text: exitStatus()},
				cmdline.ManSection{Title: "ENVIRONMENT", Text: "A flag given on the command line wins over its variable.\n\n" +
					envVars(app()) + docs.Help("environment")},
				cmdline.ManSection{Title: "SEE ALSO", Text: "jq(1), etcdctl(1), metroctl; docs/reference.md in the source."}))
			return err
		},
	}
}

// envVars lists the variables that flags of app's commands read, each
// with the flags and commands, for the man page's ENVIRONMENT.
func envVars(app *cli.App) string {
	var order []string
	users := map[string][]string{}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			if df, ok := f.(cli.DocGenerationFlag); ok {
				for _, v := range df.GetEnvVars() {
					key := v + "\n   --" + f.Names()[0] + ", for "
					if users[key] == nil {
						order = append(order, key)
					}
					users[key] = append(users[key], c.Name)
				}
			}
		}
	}
	var b strings.Builder
	for _, k := range order {
		b.WriteString(k + strings.Join(users[k], ", ") + "\n")
	}
	return b.String()
}
