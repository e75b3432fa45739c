// Package mgmtflags is the command line of mgmt's World: the flags of
// key that follow one of its areas (--mgmt AREA, its namespace, and what
// narrows the exported resources), and their parsing into the watch that
// etcdkv.Mgmt is. It keeps the flag table next to the rules it chooses
// among, out of the command. Every error of parsing is a usage error
// (cmdline.Usagef) that names the flag.
package mgmtflags

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// Flags are key's flags for following an area of mgmt's World.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mgmt", Usage: "follow an area of mgmt's World: `AREA` exported, strings, scheduler or deploy (no KEY then)"},
		&cli.StringFlag{Name: "mgmt-namespace", Value: "/_mgmt", Usage: "mgmt's namespace in etcd, `PREFIX`"},
		&cli.StringFlag{Name: "kind", Usage: "--mgmt exported: resources of `KIND` only (file, svc, …)"},
		&cli.StringFlag{Name: "name", Usage: "--mgmt exported: the resource named `NAME` only"},
		&cli.StringFlag{Name: "from", Usage: "--mgmt exported: resources exported by `HOST` only"},
		&cli.StringFlag{Name: "for", Usage: "--mgmt exported: what `HOST` collects: exported to it or to every host (*), narrowed by etcd"},
	}
}

// Parse reads Flags from c: the area to watch, nil when --mgmt is not
// given.
func Parse(c *cli.Context) (*etcdkv.Mgmt, error) {
	area := c.String("mgmt")
	selections := []string{"kind", "name", "from", "for"}
	onlyExported := func() error {
		for _, f := range selections {
			if c.IsSet(f) {
				return cmdline.Usagef("--%s: only with --mgmt exported", f)
			}
		}
		return nil
	}
	if !c.IsSet("mgmt") {
		return nil, onlyExported()
	}
	m, err := etcdkv.MgmtArea(area, c.String("mgmt-namespace"))
	switch {
	case errors.Is(err, etcdkv.ErrUnknownArea):
		return nil, cmdline.Usagef("--mgmt: %v", err)
	case err != nil:
		return nil, cmdline.Usagef("--mgmt-namespace: %v", err)
	}
	if err := onlyExported(); area != "exported" && err != nil {
		return nil, err
	}
	for _, f := range selections[:3] {
		if c.IsSet(f) {
			m.Select(f, c.String(f))
		}
	}
	if c.IsSet("for") {
		if err := m.CollectFor(c.String("for")); err != nil {
			return nil, cmdline.Usagef("--for: %v", err)
		}
	}
	return m, nil
}
