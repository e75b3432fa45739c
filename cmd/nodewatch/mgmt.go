package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// mgmtFlags are key's flags for following an area of mgmt's World
// (etcdkv.Mgmt).
func mgmtFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mgmt", Usage: "follow an area of mgmt's World: `AREA` exported, strings, scheduler or deploy (no KEY then)"},
		&cli.StringFlag{Name: "mgmt-namespace", Value: "/_mgmt", Usage: "mgmt's namespace in etcd, `PREFIX`"},
		&cli.StringFlag{Name: "kind", Usage: "--mgmt exported: resources of `KIND` only (file, svc, …)"},
		&cli.StringFlag{Name: "name", Usage: "--mgmt exported: the resource named `NAME` only"},
		&cli.StringFlag{Name: "from", Usage: "--mgmt exported: resources exported by `HOST` only"},
		&cli.StringFlag{Name: "for", Usage: "--mgmt exported: what `HOST` collects: exported to it or to every host (*), narrowed by etcd"},
	}
}

// parseMgmtOptions reads the mgmt flags; nil when --mgmt is not given.
func parseMgmtOptions(c *cli.Context) (*etcdkv.Mgmt, error) {
	area := c.String("mgmt")
	selections := []string{"kind", "name", "from", "for"}
	onlyExported := func() error {
		for _, f := range selections {
			if c.IsSet(f) {
				return usagef("--%s: only with --mgmt exported", f)
			}
		}
		return nil
	}
	if !c.IsSet("mgmt") {
		return nil, onlyExported()
	}
	if !slices.Contains(etcdkv.MgmtAreas(), area) {
		return nil, usagef("--mgmt: unknown area %q (want %s)", area, strings.Join(etcdkv.MgmtAreas(), ", "))
	}
	m, err := etcdkv.MgmtArea(area, c.String("mgmt-namespace"))
	if err != nil {
		return nil, usagef("--mgmt-namespace: %v", err)
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
			return nil, usagef("--for: %v", err)
		}
	}
	return m, nil
}
