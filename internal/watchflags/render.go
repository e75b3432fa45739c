package watchflags

import (
	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/render"
)

// renderFlags are the flags of --render: files kept in step with the
// view, in the place of printing or --exec.
func renderFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "render", Usage: "instead of printing, keep the file of the --to that goes with it in step with the view: jq `PROGRAM` over the view (as --until sees it), its outputs as jq -r prints them, written atomically when they change; repeatable in pairs with --to"},
		&cli.StringSliceFlag{Name: "to", Usage: "the `FILE` the --render before it writes (the Nth --to goes with the Nth --render)", TakesFile: true},
		&cli.StringFlag{Name: "check", Usage: "with --render: run `CMD` on a new content before it replaces a file (its path in $1 and $NODEWATCH_RENDER_FILE); if it fails, the file stays as it was"},
		&cli.StringFlag{Name: "reload", Usage: "with --render: run `CMD` after the files were replaced (once per update, retried like --exec's handler)"},
	}
}

// parseRender reads --render, --to, --check and --reload, its programs
// compiled with vars.
func (o *Options) parseRender(c *cli.Context, vars jq.Vars) error {
	programs, files := c.StringSlice("render"), c.StringSlice("to")
	if len(programs) == 0 {
		for _, f := range []string{"to", "check", "reload"} {
			if c.IsSet(f) {
				return cmdline.Usagef("--%s: only with --render", f)
			}
		}
		return nil
	}
	switch {
	case len(files) != len(programs):
		return cmdline.Usagef("--render: each wants a --to FILE: %d --render, %d --to", len(programs), len(files))
	case c.IsSet("exec"):
		return cmdline.Usagef("--render: not with --exec (run what follows a new file with --reload)")
	case c.IsSet("state"):
		return cmdline.Usagef("--state: not with --render, whose files are their own state (a restart renders at once)")
	case c.IsSet("changes-only"):
		return cmdline.Usagef("--changes-only: not with --render, which renders the whole view")
	case o.Heartbeat > 0:
		return cmdline.Usagef("--heartbeat: not with --render, which writes only when a file changes")
	}
	r := &render.Renderer{Check: c.String("check"), Reload: c.String("reload"), Timeout: c.Duration("exec-timeout"), Strict: o.Strict}
	for i, expr := range programs {
		prog, err := jq.Compile("--render", expr, vars)
		if err != nil {
			return cmdline.Usage(err)
		}
		r.Targets = append(r.Targets, render.Target{Program: prog, To: files[i]})
	}
	if err := r.Validate(); err != nil {
		return cmdline.Usage(err)
	}
	o.Renderer = r
	return nil
}
