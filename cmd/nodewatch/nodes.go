package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/client"
	"github.com/nodewatch/nodewatch/internal/dial"
)

// nodesOptions are the flags of `nodewatch nodes` and `nodewatch node ID`.
type nodesOptions struct {
	*watchOptions
	endpoints []string
	tls       *dial.TLS
	// metroctlDefault: the credentials are metroctl's, found in this
	// directory without a flag naming it.
	metroctlDefault string
	nodeID          string        // "" for every node
	health          time.Duration // poll GetNodes this often; 0: no health
	keepalive       dial.Keepalive
}

const nodesDescription = `Follows the Watch RPC of a Monogon Metropolis Curator (or of nodewatch serve)
and prints every node change as NDJSON. The first batch holds every node and
ends with synced: true; after a lost connection nodewatch reconnects (to the
next endpoint, or to the leader a non-leader names) and prints only what
differs.

The Watch stream carries no health. With --health, each node also gets
"health" (HEALTH_HEALTHY, HEALTH_HEARTBEAT_TIMEOUT, HEALTH_UNKNOWN) and
"time_since_heartbeat" from Management.GetNodes, polled every
--health-interval; a change of health prints updated (a change of
time_since_heartbeat alone prints nothing).

Examples:
   nodewatch nodes --curator 10.0.0.1:7835,10.0.0.2:7835
   nodewatch nodes --once | jq -r 'select(.type=="new") | .object.status.external_address'
   nodewatch nodes --until '[.[] | select(.state == "NODE_STATE_UP")] | length >= 3' --timeout 5m
   nodewatch nodes --health --until 'length >= 3 and all(.health == "HEALTH_HEALTHY")' --timeout 5m
   nodewatch nodes --filter '.roles.consensus_member' -o text
   nodewatch nodes --equals '.status.external_address' --changes-only`

const nodeDescription = `Follows one node through the Curator Watch RPC (node_in_cluster). Nothing is
printed until the node exists; its deletion prints deleted. The wire has no
"synced" marker for one node: if the server sends nothing within a second of
connecting, the node is taken not to exist yet (the initial batch is empty).

Examples:
   nodewatch node metropolis-0123456789abcdef0123456789abcdef --until '.state == "NODE_STATE_UP"' --timeout 10m
   nodewatch node "$ID" -o text`

func nodesCommand(e *env) *cli.Command {
	return curatorCommand(e, &cli.Command{
		Name:        "nodes",
		Usage:       "watch every node of a Metropolis cluster (Curator Watch)",
		Description: nodesDescription,
	}, func(c *cli.Context) (string, error) {
		if c.NArg() != 0 {
			return "", usagef("nodes: no arguments expected, got %q (did you mean: nodewatch node ID?)", c.Args().First())
		}
		return "", nil
	})
}

func nodeCommand(e *env) *cli.Command {
	return curatorCommand(e, &cli.Command{
		Name:        "node",
		Usage:       "watch one node of a Metropolis cluster (Curator Watch)",
		ArgsUsage:   "ID",
		Description: nodeDescription,
	}, func(c *cli.Context) (string, error) {
		switch {
		case c.NArg() != 1:
			return "", usagef("node: want exactly one node ID, got %d arguments", c.NArg())
		case c.Args().First() == "":
			return "", usagef("node: the node ID must not be empty")
		}
		return c.Args().First(), nil
	})
}

// curatorCommand completes c, a command that watches the Curator: its
// flags, and an action that takes the node ID (or "" for every node) from
// nodeID, then parses and runs.
func curatorCommand(e *env, c *cli.Command, nodeID func(*cli.Context) (string, error)) *cli.Command {
	c.Flags = append(append(curatorFlags(), healthFlags()...), watchFlags()...)
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
	w, err := parseWatchOptions(c, "", "")
	if err != nil {
		return nil, err
	}
	o := &nodesOptions{watchOptions: w, nodeID: nodeID, endpoints: splitList(c.String("curator"))}
	if len(o.endpoints) == 0 {
		return nil, usagef("--curator: no endpoint given")
	}
	ct, err := parseClientTLS(c, e, true)
	if err != nil {
		return nil, err
	}
	o.tls, o.metroctlDefault = &ct.TLS, ct.metroctlDefault
	if o.keepalive, err = parseKeepalive(c); err != nil {
		return nil, err
	}
	if c.Bool("health") {
		if o.health = c.Duration("health-interval"); o.health <= 0 {
			return nil, usagef("--health-interval: must be positive, got %v", o.health)
		}
	}
	o.List, o.Confirms = nodeID == "", "connection"
	o.target = "curator at " + strings.Join(o.endpoints, ",")
	o.Output.Summary = curator.Summary
	return o, nil
}

func runNodes(ctx context.Context, e *env, o *nodesOptions) error {
	src := &client.Client{
		Endpoints:   o.endpoints,
		TLS:         o.tls,
		NodeID:      o.nodeID,
		Logf:        e.logf,
		DialTimeout: o.dialTimeout,

		HealthInterval: o.health,
		Keepalive:      o.keepalive,
		ConfirmEvery:   o.Heartbeat / 2,
	}
	err := follow(ctx, e, o.watchOptions, src)
	if o.metroctlDefault != "" && errors.Is(err, client.ErrUnavailable) {
		err = fmt.Errorf("%w (with metroctl's credentials in %s, used because they exist; --metroctl-config '' to connect without them)", err, o.metroctlDefault)
	}
	return err
}

// defaultCurator is where `nodes` looks for a Curator, and where `serve`
// listens, unless told otherwise.
func defaultCurator() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(curator.DefaultPort))
}

// curatorFlags are the connection flags for the Curator.
func curatorFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "curator", Value: defaultCurator(), EnvVars: []string{"NODEWATCH_CURATOR"}, Usage: "Curator endpoints, comma-separated `HOST:PORT[,HOST:PORT…]`"},
	}, append(append(tlsFlags(), curatorTLSFlags()...), keepaliveFlags()...)...)
}

// healthFlags add health to the Curator's nodes.
func healthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "health", Usage: "add each node's health and time_since_heartbeat from Management.GetNodes, polled every --health-interval"},
		&cli.DurationFlag{Name: "health-interval", Value: 5 * time.Second, Usage: "with --health: poll GetNodes every `D`"},
	}
}
