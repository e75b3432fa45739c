package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/connflags"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/mgmtflags"
	"github.com/nodewatch/nodewatch/internal/state"
	"github.com/nodewatch/nodewatch/internal/watch"
	"github.com/nodewatch/nodewatch/internal/watchflags"
)

// keyOptions are the flags of `nodewatch key`.
type keyOptions struct {
	*watchflags.Options
	etcd   etcdkv.Config
	key    string
	prefix bool
	also   []string     // more prefixes (--mgmt exported --for)
	rules  etcdkv.Rules // --value, and --key-pattern or --mgmt's
	rev    int64        // --rev: start at this revision (0: now)
	// verbose: -v, every failed attempt to reconnect on stderr.
	verbose bool
}

func keyCommand(e *env) *cli.Command {
	return subcommand("key", "watch one etcd key, or every key under a prefix", "KEY | --mgmt AREA",
		append(append(append(append(connflags.Etcd(), connflags.Verbose()),
			&cli.BoolFlag{Name: "prefix", Usage: "watch every key that starts with KEY"},
			&cli.StringFlag{Name: "key-pattern", Usage: "name the segments of keys, e.g. `PATTERN` /app/{env}/{name...}: each object gets them as .fields"},
			&cli.Int64Flag{Name: "rev", Usage: "start at revision `N`: the state as it was at N, then every revision after it, one batch each, then live (as etcdctl watch --rev)", DefaultText: "now"},
			&cli.StringFlag{Name: "value", Value: "auto", Usage: "how values are decoded, `MODE`: auto, json, text, base64, gob (Go's encoding/gob, raw or base64) or query (a=1&b=2)"},
		), mgmtflags.Flags()...), watchflags.Flags()...),
		action(e, parseKeyOptions, runKey))
}

func parseKeyOptions(c *cli.Context, e *env) (*keyOptions, error) {
	preset, err := mgmtflags.Parse(c)
	if err != nil {
		return nil, err
	}
	switch {
	case preset != nil && c.NArg() != 0:
		return nil, cmdline.Usagef("key: --mgmt takes no KEY (it watches %s)", preset.Keys[0])
	case preset == nil && c.NArg() != 1:
		return nil, cmdline.Usagef("key: want exactly one KEY, got %d arguments", c.NArg())
	case preset == nil && c.Args().First() == "" && !c.Bool("prefix"):
		return nil, cmdline.Usagef(`key: KEY must not be empty (to watch every key: --prefix "")`)
	}
	alsoFilter := ""
	if preset != nil {
		alsoFilter = preset.Filter
	}
	w, err := watchflags.Parse(c, "value", alsoFilter)
	if err != nil {
		return nil, err
	}
	mode, err := etcdkv.ParseValueMode(c.String("value"))
	if err != nil {
		return nil, cmdline.Usagef("--value: %v", err)
	}
	eo, err := connflags.ParseEtcd(c, e.conn())
	if err != nil {
		return nil, err
	}
	o := &keyOptions{Options: w, etcd: eo, key: c.Args().First(), prefix: c.Bool("prefix"), rules: etcdkv.Rules{Default: mode, ModeFlag: "--value"}, rev: c.Int64("rev"), verbose: c.Bool("verbose")}
	switch {
	case c.IsSet("rev") && o.rev < 1:
		return nil, cmdline.Usagef("--rev: want a revision of 1 or more, got %d", o.rev)
	case c.IsSet("rev") && c.IsSet("state"):
		return nil, cmdline.Usagef("--rev: not with --state, which knows where to start")
	}
	if c.IsSet("key-pattern") {
		if preset != nil {
			return nil, cmdline.Usagef("--key-pattern: --mgmt names the segments itself")
		}
		p, err := etcdkv.ParseKeyPattern(c.String("key-pattern"))
		if err != nil {
			return nil, cmdline.Usagef("--key-pattern: %v", err)
		}
		o.rules.Rules = []etcdkv.Rule{{Pattern: p, Value: mode}}
	}
	if preset != nil {
		o.key, o.prefix, o.also, o.rules.Rules = preset.Keys[0], true, preset.Keys[1:], preset.Rules
		if c.IsSet("value") { // the user's --value over the preset's
			for i := range o.rules.Rules {
				o.rules.Rules[i].Value = mode
			}
		}
	}
	if len(o.rules.Rules) == 1 {
		o.rules.Name = "--key-pattern " + o.rules.Rules[0].Pattern.String()
	}
	o.Follows = append([]state.Field{
		{Name: "command", Value: "key"}, {Name: "--etcd", Value: strings.Join(eo.Endpoints, ",")},
		{Name: "KEY", Value: o.key}, {Name: "--prefix", Value: strconv.FormatBool(o.prefix)},
		{Name: "--mgmt", Value: c.String("mgmt") + " " + strings.Join(o.also, " ")},
		{Name: "--value", Value: c.String("value")}, {Name: "--key-pattern", Value: c.String("key-pattern")},
	}, o.Follows...)
	o.List, o.Confirms = o.prefix, "watch"
	o.Target = "etcd at " + strings.Join(eo.Endpoints, ",")
	o.What = "key " + o.key
	o.Output.ChangeRoot = jsondoc.Path{"value"} // the revisions change with every update
	o.Output.Summary = o.rules.Summary
	return o, nil
}

func runKey(ctx context.Context, e *env, o *keyOptions) error {
	o.etcd.DialTimeout = o.DialTimeout
	// The listings' decoding and the watch events' (by what changed since
	// a key's last event) report a key that no rule matches once.
	decode, decodeFrom := o.rules.Decoders(e.logf)
	err := follow(ctx, e, o.Options, func(h flow.Hooks) (watch.Source, watch.Lister) {
		src := &etcdkv.Source{
			Config: o.etcd,
			Watcher: etcdkv.Watcher{
				Keys:       append([]string{o.key}, o.also...),
				Prefix:     o.prefix,
				Decode:     decode,
				DecodeFrom: decodeFrom,
				StartRev:   o.rev,
				Logf:       e.logf,
				Debugf:     e.debugf(o.verbose),
				Keeps:      h.Keeps,
				Listed:     h.Listed,
				// Confirmations at least twice a heartbeat.
				ConfirmEvery: o.Heartbeat / 2,
			},
		}
		return src, src // etcd lists a prefix page by page (--once)
	})
	if errors.Is(err, etcdkv.ErrStartRev) {
		return fmt.Errorf("--rev: %w", err)
	}
	return err
}
