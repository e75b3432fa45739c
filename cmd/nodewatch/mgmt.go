package main

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// mgmt (the config management engine) keeps its World in etcd under a
// namespace, /_mgmt: strings, per-host string maps, exported resources
// (gob), deploys and its scheduler. `key --mgmt AREA` follows one area
// with its keys' segments named and its values decoded, and with mgmt's
// own collect semantics as flags.

// mgmtFlags are key's flags for the mgmt preset.
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

// mgmtRule is a pattern (after the namespace) and how the values of the
// keys it matches are decoded.
type mgmtRule struct {
	pattern string
	value   etcdkv.ValueMode
}

// mgmtAreas are mgmt's areas: the directory under the namespace and the
// layout of their keys, most specific pattern first.
var mgmtAreas = map[string][]mgmtRule{
	"exported": {{"/exported/{to}/{from}/{kind}/{name...}", etcdkv.ValueGob}},
	// A Str and a StrMap entry share /strings/: KEY/HOST is a map's.
	"strings": {{"/strings/{key}/{host}", etcdkv.ValueText}, {"/strings/{key}", etcdkv.ValueText}},
	"scheduler": {
		{"/scheduler/hostname/{host}/{namespace}", etcdkv.ValueQuery},
		{"/scheduler/schedule/{namespace}", etcdkv.ValueText},
		{"/scheduler/election/{lease}", etcdkv.ValueText},
	},
	"deploy": {{"/deploy/{id}/payload", etcdkv.ValueGob}, {"/deploy/{id}/hash", etcdkv.ValueText}},
}

// mgmtOptions is what --mgmt makes of the key command.
type mgmtOptions struct {
	key    string   // the prefix
	also   []string // a second prefix (--for)
	rules  []keyRule
	filter string // jq over the objects, for --kind, --name, --from, --for
}

// parseMgmtOptions reads the mgmt flags; nil when --mgmt is not given.
func parseMgmtOptions(c *cli.Context) (*mgmtOptions, error) {
	area := c.String("mgmt")
	if !c.IsSet("mgmt") {
		for _, f := range []string{"kind", "name", "from", "for"} {
			if c.IsSet(f) {
				return nil, usagef("--%s: only with --mgmt exported", f)
			}
		}
		return nil, nil
	}
	rules, ok := mgmtAreas[area]
	if !ok {
		var names []string
		for a := range mgmtAreas {
			names = append(names, a)
		}
		sort.Strings(names)
		return nil, usagef("--mgmt: unknown area %q (want %s)", area, strings.Join(names, ", "))
	}
	ns := strings.TrimSuffix(c.String("mgmt-namespace"), "/")
	if !strings.HasPrefix(ns, "/") {
		return nil, usagef("--mgmt-namespace: want a key prefix starting with /, got %q", c.String("mgmt-namespace"))
	}
	dir := strings.SplitN(rules[0].pattern, "/", 3)[1]
	o := &mgmtOptions{key: ns + "/" + dir + "/"}
	for _, r := range rules {
		p, err := etcdkv.ParseKeyPattern(ns + r.pattern)
		if err != nil {
			return nil, usagef("--mgmt-namespace: %v", err)
		}
		o.rules = append(o.rules, keyRule{pattern: p, value: r.value})
	}
	var conds []string
	for _, f := range []struct{ flag, field string }{{"kind", "kind"}, {"name", "name"}, {"from", "from"}} {
		if !c.IsSet(f.flag) {
			continue
		}
		if area != "exported" {
			return nil, usagef("--%s: only with --mgmt exported", f.flag)
		}
		conds = append(conds, ".fields."+f.field+" == "+jqString(c.String(f.flag)))
	}
	if c.IsSet("for") {
		host := c.String("for")
		switch {
		case area != "exported":
			return nil, usagef("--for: only with --mgmt exported")
		case host == "" || strings.Contains(host, "/"):
			return nil, usagef("--for: want a host name, got %q", host)
		}
		// What mgmt on HOST collects: exported to HOST, or to every host.
		// etcd narrows to the two prefixes; the filter keeps keys the
		// pattern does not match (no fields) out.
		o.key = ns + "/exported/" + host + "/"
		if host != "*" {
			o.also = []string{ns + "/exported/*/"}
		}
		conds = append(conds, "(.fields.to == "+jqString(host)+" or .fields.to == \"*\")")
	}
	o.filter = strings.Join(conds, " and ")
	return o, nil
}

// jqString returns s as a jq string literal (a JSON string is one).
func jqString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
