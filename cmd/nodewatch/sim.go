package main

import (
	"context"
	"math"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/connflags"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/sim"
)

// maxSimNodes bounds --nodes: a million records of about 1 KiB already
// take half of etcd's default 2 GiB quota.
const maxSimNodes = 1_000_000

// simOptions are the flags of `nodewatch sim`.
type simOptions struct {
	etcd        etcdkv.Config
	dialTimeout time.Duration
	sim         sim.Config
	plan        sim.Plan
}

// simCommand is `nodewatch sim`: it writes a simulated fleet of node
// records into etcd and keeps changing it.
func simCommand(e *env) *cli.Command {
	return subcommand("sim", "write a simulated fleet of node records into etcd and keep changing it", "",
		append(connflags.Etcd(),
			&cli.IntFlag{Name: "nodes", Value: sim.DefaultNodes, Usage: "keep the fleet near `N` nodes"},
			&cli.Float64Flag{Name: "rate", Value: 1, Usage: "make at most `R` changes per second (0: as fast as etcd takes them)"},
			&cli.DurationFlag{Name: "duration", Usage: "stop after `D` (0: no limit)"},
			&cli.Int64Flag{Name: "steps", Usage: "stop after `N` changes (0: no limit)"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed `S` of the simulation: the same seed writes the same records"},
			&cli.StringFlag{Name: "prefix", Value: curator.DefaultPrefix, Usage: "write node records under `PREFIX`"},
			&cli.StringFlag{Name: "format", Value: "json", Usage: "record `FORMAT`: json (protobuf JSON) or binary (protobuf)"},
			&cli.BoolFlag{Name: "clear", Usage: "first delete every key under the prefix"},
			&cli.DurationFlag{Name: "dial-timeout", Value: 5 * time.Second, Usage: "exit 3 when no connection is made within `D`"},
		),
		action(e, parseSimOptions, runSim))
}

// parseSimOptions reads and checks the flags of `nodewatch sim`; every
// error is a usage error.
func parseSimOptions(c *cli.Context, e *env) (*simOptions, error) {
	if c.NArg() > 0 {
		return nil, cmdline.Usagef("sim: takes no arguments, got %q", c.Args().First())
	}
	o := &simOptions{
		dialTimeout: c.Duration("dial-timeout"),
		sim: sim.Config{
			Nodes:  c.Int("nodes"),
			Seed:   c.Int64("seed"),
			Prefix: c.String("prefix"),
		},
		plan: sim.Plan{
			Rate:     c.Float64("rate"),
			Duration: c.Duration("duration"),
			Steps:    c.Int64("steps"),
			Clear:    c.Bool("clear"),
		},
	}
	switch {
	case o.sim.Nodes < 1 || o.sim.Nodes > maxSimNodes:
		return nil, cmdline.Usagef("--nodes: must be between 1 and %d, got %d", maxSimNodes, o.sim.Nodes)
	case !(o.plan.Rate >= 0) || math.IsInf(o.plan.Rate, 0):
		return nil, cmdline.Usagef("--rate: must be a finite number >= 0, got %v", o.plan.Rate)
	case o.plan.Duration < 0:
		return nil, cmdline.Usagef("--duration: must not be negative, got %v", o.plan.Duration)
	case o.plan.Steps < 0:
		return nil, cmdline.Usagef("--steps: must not be negative, got %d", o.plan.Steps)
	case o.sim.Prefix == "":
		return nil, cmdline.Usagef("--prefix: must not be empty")
	case o.dialTimeout <= 0:
		return nil, cmdline.Usagef("--dial-timeout: must be positive, got %v", o.dialTimeout)
	}
	f, err := sim.ParseFormat(c.String("format"))
	if err != nil {
		return nil, cmdline.Usagef("--format: %v", err)
	}
	o.sim.Format = f
	if o.etcd, err = connflags.ParseEtcd(c, e.conn()); err != nil {
		return nil, err
	}
	return o, nil
}

// runSim connects and plays the simulation until a limit is reached or
// ctx ends.
func runSim(ctx context.Context, e *env, o *simOptions) error {
	o.etcd.DialTimeout = o.dialTimeout
	client, err := etcdkv.Connect(ctx, o.etcd, o.sim.Prefix, true)
	if err != nil {
		return err
	}
	defer client.Close()
	return sim.New(o.sim).Play(ctx, client, o.plan, e.logf)
}
