package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	keys   []string // KEY…, or --mgmt's prefixes
	prefix bool
	rules  etcdkv.Rules // --value, and --key-pattern or --mgmt's
	rev    int64        // --rev: start at this revision (0: now)
	// verbose: -v, every failed attempt to reconnect on stderr.
	verbose bool
}

func keyCommand(e *env) *cli.Command {
	return subcommand("key", "watch etcd keys, or every key under prefixes", "KEY... | --mgmt AREA",
		append(append(append(append(connflags.Etcd(), connflags.Verbose()),
			&cli.BoolFlag{Name: "prefix", Usage: "watch every key that starts with a KEY"},
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
	keys, prefix := c.Args().Slice(), c.Bool("prefix")
	switch {
	case preset != nil && len(keys) != 0:
		return nil, cmdline.Usagef("key: --mgmt takes no KEY (it watches %s)", strings.Join(preset.Keys, " and "))
	case preset == nil && len(keys) == 0:
		return nil, cmdline.Usagef("key: want a KEY (or --mgmt AREA)")
	case preset == nil && !prefix && slices.Contains(keys, ""):
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
	o := &keyOptions{Options: w, etcd: eo, keys: keys, prefix: prefix, rules: etcdkv.Rules{Default: mode, ModeFlag: "--value"}, rev: c.Int64("rev"), verbose: c.Bool("verbose")}
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
		o.keys, o.prefix, o.rules.Rules = preset.Keys, true, preset.Rules
		if c.IsSet("value") { // the user's --value over the preset's
			for i := range o.rules.Rules {
				o.rules.Rules[i].Value = mode
			}
		}
	}
	if len(o.rules.Rules) == 1 {
		o.rules.Name = "--key-pattern " + o.rules.Rules[0].Pattern.String()
	}
	followed := etcdkv.Followed(o.keys, o.prefix)
	o.Follows = append(o.follows(c, followed, preset), o.Follows...)
	// The view is a list with --prefix or several KEYs (even the same
	// one twice: what --until sees follows from the command line), the
	// one object (or null) with one KEY.
	o.List, o.Confirms = o.prefix || len(o.keys) > 1, "watch"
	o.Target = "etcd at " + strings.Join(eo.Endpoints, ",")
	o.What = "key " + strings.Join(followed, " ")
	if o.Handler != nil {
		// A batch of one change also gets the variables etcdctl watch
		// gives its command, ETCD_WATCH_*.
		o.Handler.ChangeEnv = etcdkv.EtcdctlEnv{Rules: &o.rules}
	}
	o.Output.ChangeRoot = jsondoc.Path{"value"} // the revisions change with every update
	o.Output.Summary = o.rules.Summary
	if err := o.ParseColumns(c, keyColumns); err != nil {
		return nil, err
	}
	return o, nil
}

// keyColumns are the columns of -o table for keys, as --columns would
// give them: the key, its value (a string as it is, else compact JSON)
// and the revision that last changed it.
const keyColumns = `key=.key, value=.value, rev=.mod_revision`

// follows are the fields of what a --state file of key follows (the
// command's; Parse adds the expressions'). The keys are those followed
// (etcdkv.Followed): `key /a /a` and `key /a` share a file, and so do
// `key --prefix /a/ /a/b/` and `key --prefix /a/`. One key is "KEY", as
// before there could be several, more are "KEY 2", "KEY 3", …; --mgmt's
// prefixes after the first are in "--mgmt", after the area, as before.
func (o *keyOptions) follows(c *cli.Context, followed []string, preset *etcdkv.Mgmt) []state.Field {
	fields := []state.Field{{Name: "command", Value: "key"}, {Name: "--etcd", Value: strings.Join(o.etcd.Endpoints, ",")}}
	mgmt := c.String("mgmt") + " "
	if preset != nil {
		fields = append(fields, state.Field{Name: "KEY", Value: preset.Keys[0]})
		mgmt += strings.Join(preset.Keys[1:], " ")
	} else {
		for i, k := range followed {
			name := "KEY"
			if i > 0 {
				name += " " + strconv.Itoa(i+1)
			}
			fields = append(fields, state.Field{Name: name, Value: k})
		}
	}
	return append(fields,
		state.Field{Name: "--prefix", Value: strconv.FormatBool(o.prefix)}, state.Field{Name: "--mgmt", Value: mgmt},
		state.Field{Name: "--value", Value: c.String("value")}, state.Field{Name: "--key-pattern", Value: c.String("key-pattern")})
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
				Keys:       o.keys,
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
		o.Hinter = src  // a key absent while keys live under it
		return src, src // etcd lists a prefix page by page (--once)
	})
	if errors.Is(err, etcdkv.ErrStartRev) {
		return fmt.Errorf("--rev: %w", err)
	}
	return err
}
