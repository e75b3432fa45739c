//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
)

// onePrefix is where row 11's one record lives: a node record of
// about 200 B, alone under its prefix.
const onePrefix = "/one/"

// oneRuns is how many runs of each tool row 11 alternates per pair: each
// run is tens of milliseconds, one process start.
const oneRuns = 10

// rowOne: row 11, what a script pays to read one small record, as
// `nodewatch key K --once | jq` does: key --once against etcdctl get -w
// json, each with its stdout a pipe that the measuring process drains.
// The wall, CPU and peak RSS of a whole process, start-up and exit
// included; oneRuns of each per pair, alternated.
func rowOne(ctx context.Context, c config, e *etcdServer, t *table) error {
	s := shape{"200", 200}
	if _, err := load(ctx, e, onePrefix, s, 1, 1); err != nil {
		return err
	}
	var nw, ec [3][]float64 // wall, CPU, peak RSS
	add := func(to *[3][]float64, u usage) {
		to[0], to[1], to[2] = append(to[0], u.wall.Seconds()), append(to[1], u.cpu.Seconds()), append(to[2], float64(u.maxRSS))
	}
	for range c.pairs * oneRuns {
		a, err := measurePiped(c.nodewatch, "key", "--etcd", e.URL, "--prefix", onePrefix, "--once")
		if err != nil {
			return err
		}
		b, err := measurePiped(c.etcdctl, "--endpoints", e.URL, "get", "--prefix", onePrefix, "-w", "json")
		if err != nil {
			return err
		}
		if a.out == 0 || b.out == 0 {
			return fmt.Errorf("a tool printed nothing for %s", onePrefix)
		}
		add(&nw, a.usage)
		add(&ec, b.usage)
	}
	what := fmt.Sprintf("key --prefix --once vs etcdctl get --prefix -w json, one of the %s, stdout a pipe: ", s.label())
	t.recorded(11, what+"wall", nw[0], ec[0], millis)
	t.recorded(11, what+"CPU", nw[1], ec[1], millis)
	t.recorded(11, what+"peak RSS", nw[2], ec[2], mib)
	return nil
}

// pipedUsage is a process's usage and how many bytes it printed.
type pipedUsage struct {
	usage
	out int64
}

// measurePiped is measure with the command's stdout a pipe, drained by
// `compare measured`, as a shell pipeline's reader would.
func measurePiped(name string, args ...string) (pipedUsage, error) {
	u, stdout, err := measureWith("-pipe", name, args...)
	if err != nil {
		return pipedUsage{}, err
	}
	var n int64
	if _, err := fmt.Sscanf(strings.TrimSpace(stdout), "piped %d", &n); err != nil {
		return pipedUsage{}, fmt.Errorf("%s: no byte count in %q", name, stdout)
	}
	return pipedUsage{u, n}, nil
}
