package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/docs"
	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/connflags"
	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/client"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/state"
	"github.com/nodewatch/nodewatch/internal/watch"
	"github.com/nodewatch/nodewatch/internal/watchflags"
)

// nodesOptions are the flags of `nodewatch nodes` and `nodewatch node ID`.
type nodesOptions struct {
	*watchflags.Options
	conn   *connflags.CuratorConn
	nodeID string        // "" for every node
	health time.Duration // poll GetNodes this often; 0: no health
	// verbose: -v, every failed attempt to reconnect on stderr.
	verbose bool
}

func nodesCommand(e *env) *cli.Command {
	return curatorCommand(e, &cli.Command{
		Name:        "nodes",
		Usage:       "watch every node of a Metropolis cluster (Curator Watch)",
		Description: docs.Help("nodes"),
	}, func(c *cli.Context) (string, error) {
		if c.NArg() != 0 {
			return "", cmdline.Usagef("nodes: no arguments expected, got %q (did you mean: nodewatch node ID?)", c.Args().First())
		}
		return "", nil
	})
}

func nodeCommand(e *env) *cli.Command {
	return curatorCommand(e, &cli.Command{
		Name:        "node",
		Usage:       "watch one node of a Metropolis cluster (Curator Watch)",
		ArgsUsage:   "ID",
		Description: docs.Help("node"),
	}, func(c *cli.Context) (string, error) {
		switch {
		case c.NArg() != 1:
			return "", cmdline.Usagef("node: want exactly one node ID, got %d arguments", c.NArg())
		case c.Args().First() == "":
			return "", cmdline.Usagef("node: the node ID must not be empty")
		}
		return c.Args().First(), nil
	})
}

// curatorCommand completes c, a command that watches the Curator: its
// flags, and an action that takes the node ID (or "" for every node) from
// nodeID, then parses and runs.
func curatorCommand(e *env, c *cli.Command, nodeID func(*cli.Context) (string, error)) *cli.Command {
	c.Flags = append(append(append(connflags.Curator(), connflags.Verbose()), healthFlags()...), watchflags.Flags()...)
	c.Action = func(c *cli.Context) error {
		id, err := nodeID(c)
		if err != nil {
			return err
		}
		o, err := parseNodesOptions(c, e, id)
		if err != nil {
			return err
		}
		return runNodes(c.Context, e, o)
	}
	return c
}

func parseNodesOptions(c *cli.Context, e *env, nodeID string) (*nodesOptions, error) {
	w, err := watchflags.Parse(c, "", "")
	if err != nil {
		return nil, err
	}
	o := &nodesOptions{Options: w, nodeID: nodeID, verbose: c.Bool("verbose")}
	if o.conn, err = connflags.ParseCurator(c, e.conn()); err != nil {
		return nil, err
	}
	if c.Bool("health") {
		if o.health = c.Duration("health-interval"); o.health <= 0 {
			return nil, cmdline.Usagef("--health-interval: must be positive, got %v", o.health)
		}
	}
	o.Follows = append([]state.Field{
		{Name: "command", Value: c.Command.Name}, {Name: "--curator", Value: strings.Join(o.conn.Endpoints, ",")},
		{Name: "ID", Value: nodeID}, {Name: "--health", Value: strconv.FormatBool(c.Bool("health"))},
	}, o.Follows...)
	o.List, o.Confirms = nodeID == "", "connection"
	o.AllProcs = o.Once && nodeID == ""
	o.Target = "curator at " + strings.Join(o.conn.Endpoints, ",")
	o.What = "node " + nodeID
	o.Output.Summary = curator.Summary
	if err := o.ParseColumns(c, nodeColumns(c.Bool("health"))); err != nil {
		return nil, err
	}
	return o, nil
}

func runNodes(ctx context.Context, e *env, o *nodesOptions) error {
	return o.conn.Explain(follow(ctx, e, o.Options, func(h flow.Hooks) (watch.Source, watch.Lister) {
		c := &client.Client{
			Endpoints:   o.conn.Endpoints,
			TLS:         o.conn.TLS,
			NodeID:      o.nodeID,
			Logf:        e.logf,
			Debugf:      e.debugf(o.verbose),
			Listed:      h.Listed,
			DialTimeout: o.DialTimeout,

			HealthInterval: o.health,
			Keepalive:      o.conn.Keepalive,
			ConfirmEvery:   o.Heartbeat / 2,
		}
		o.Hinter = c  // node ID not there: the ids closest to it
		return c, nil // the Curator's backlog comes whole
	}))
}

// healthFlags add health to the Curator's nodes.
func healthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "health", Usage: "add each node's health and time_since_heartbeat from Management.GetNodes, polled every --health-interval"},
		&cli.DurationFlag{Name: "health-interval", Value: 5 * time.Second, Usage: "with --health: poll GetNodes every `D`"},
	}
}

// nodeColumns are the columns of -o table for nodes, as --columns would
// give them: what -o text's summary shows, the labels, and the age.
func nodeColumns(health bool) string {
	cols := []string{`id=.id`, `state=.state // "" | ltrimstr("NODE_STATE_")`}
	if health {
		cols = append(cols, `health=.health // "" | ltrimstr("HEALTH_")`)
	}
	return strings.Join(append(cols, `address=.status.external_address`, `roles=.roles // {} | keys | join(",")`,
		`labels=[.labels.pairs[]? | "\(.key)=\(.value)"] | join(",")`, `age`), ", ")
}
