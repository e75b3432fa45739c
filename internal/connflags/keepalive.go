package connflags

import (
	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/dial"
)

// keepaliveFlags are the liveness flags of every command that connects.
func keepaliveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "keepalive-time", Value: dial.DefaultKeepaliveTime, Usage: "after `D` without hearing from the server, ask it to prove the connection (and an etcd watch) alive"},
		&cli.DurationFlag{Name: "keepalive-timeout", Value: dial.DefaultKeepaliveTimeout, Usage: "give up a connection whose server did not answer within `D`, and reconnect"},
	}
}

// parseKeepalive reads keepaliveFlags.
func parseKeepalive(c *cli.Context) (dial.Keepalive, error) {
	k := dial.Keepalive{Time: c.Duration("keepalive-time"), Timeout: c.Duration("keepalive-timeout")}
	switch {
	case k.Time <= 0:
		return k, cmdline.Usagef("--keepalive-time: must be positive, got %v", k.Time)
	case k.Timeout <= 0:
		return k, cmdline.Usagef("--keepalive-timeout: must be positive, got %v", k.Timeout)
	}
	return k, nil
}
