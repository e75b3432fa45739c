package sim

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Plan is how long and how fast `nodewatch sim` plays a simulation, and
// whether it first clears the prefix.
type Plan struct {
	Rate     float64       // changes per second at most; <= 0: as fast as etcd takes them
	Duration time.Duration // stop after; 0: no limit
	Steps    int64         // stop after this many changes; 0: no limit
	Clear    bool          // first delete every key under the prefix
}

// Play clears the prefix if asked, writes the initial fleet and changes it
// as p says, until a limit is reached (nil) or ctx ends (ctx.Err()). It
// reports what it did through logf, a summary included however it ends.
func (s *Sim) Play(ctx context.Context, c *clientv3.Client, p Plan, logf func(format string, args ...any)) error {
	if p.Clear {
		resp, err := c.Delete(ctx, s.cfg.Prefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("clear %q: %w", s.cfg.Prefix, err)
		}
		logf("sim: deleted %d keys under %q", resp.Deleted, s.cfg.Prefix)
	}
	defer func() { logf("sim: %v", s.Stats()) }()
	if err := s.Populate(ctx, c); err != nil {
		return err
	}
	logf("sim: wrote %d nodes under %q (seed %d, %s records); changing them %s%s",
		s.cfg.Nodes, s.cfg.Prefix, s.cfg.Seed, s.cfg.Format, p.describeRate(), p.describeLimits())
	return s.RunSteps(ctx, c, p.Rate, p.Duration, p.Steps)
}

// describeRate says how fast the simulation goes, e.g. "at up to 2/s".
func (p Plan) describeRate() string {
	if p.Rate <= 0 {
		return "as fast as etcd allows"
	}
	return fmt.Sprintf("at up to %g/s", p.Rate)
}

// describeLimits says when the simulation ends.
func (p Plan) describeLimits() string {
	changes := "changes"
	if p.Steps == 1 {
		changes = "change"
	}
	switch {
	case p.Duration > 0 && p.Steps > 0:
		return fmt.Sprintf(" for %v or %d %s", p.Duration, p.Steps, changes)
	case p.Duration > 0:
		return fmt.Sprintf(" for %v", p.Duration)
	case p.Steps > 0:
		return fmt.Sprintf(" for %d %s", p.Steps, changes)
	}
	return " until interrupted"
}
