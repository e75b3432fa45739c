// Command compare is make bench-compare: nodewatch side by side with the
// tool a user would pick instead (etcdctl, built at a pinned version from
// the module proxy), on the same data, in one run, alternated (A B A B …),
// and a table of medians and ratios. CPU is a process's user + system
// time, memory its peak RSS. See BENCHMARKS.md.
//
// It is also the load for its rows: it writes the records (through the
// simulator), makes the changes, and, run as `compare streams`, is the
// client that opens 1,000 Watch streams on serve.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

type config struct {
	nodewatch, etcd, etcdctl string
	pairs                    int
	records                  int // row 1, 2
	keys, changes            int // rows 3, 7
	rate                     int // row 4: puts per second
	latencyFor               time.Duration
	streams, updates         int // row 6
	rows                     map[int]bool
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "measured" {
		measuredMain(os.Args[2], os.Args[3:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "streams" {
		if err := streamsMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "compare streams:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	var rows string
	flag.StringVar(&c.nodewatch, "nodewatch", "bin/nodewatch", "the nodewatch binary")
	flag.StringVar(&c.etcd, "etcd", ".bin/etcd", "the etcd binary")
	flag.StringVar(&c.etcdctl, "etcdctl", ".bin/etcdctl", "the etcdctl binary")
	flag.IntVar(&c.pairs, "pairs", 5, "alternated pairs per row")
	flag.IntVar(&c.records, "records", 100000, "records for the snapshot rows (1, 2)")
	flag.IntVar(&c.keys, "keys", 1000, "keys changed in the live rows (3, 7)")
	flag.IntVar(&c.changes, "changes", 60000, "changes in the live rows (3, 7)")
	flag.IntVar(&c.rate, "rate", 1000, "puts per second in the latency row (4)")
	flag.DurationVar(&c.latencyFor, "latency-for", 5*time.Second, "how long each latency run puts (4)")
	flag.IntVar(&c.streams, "streams", 1000, "Watch streams on serve (6)")
	flag.IntVar(&c.updates, "updates", 50, "updates fanned out to the streams (6)")
	flag.StringVar(&rows, "rows", "1,2,3,4,5,6,7", "the rows to run")
	flag.Parse()
	c.rows = map[int]bool{}
	for _, r := range strings.Split(rows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil {
			fmt.Fprintf(os.Stderr, "compare: -rows: %v\n", err)
			os.Exit(2)
		}
		c.rows[n] = true
	}
	t, err := run(context.Background(), c)
	t.print()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// table is what the run prints: one line per measured figure.
type table struct{ lines []line }

type line struct {
	row       int
	what      string
	nodewatch string
	other     string
	ratio     string
	target    string
	met       string
}

func (t *table) add(l line) {
	t.lines = append(t.lines, l)
	fmt.Fprintf(os.Stderr, "row %d: %s: nodewatch %s, other %s, ratio %s (target %s)\n", l.row, l.what, l.nodewatch, l.other, l.ratio, l.target)
}

// ratio adds a line comparing medians a (nodewatch) and b; target is the
// highest acceptable a/b.
// ratio adds the medians of a (nodewatch) and b (the other tool) and
// their ratio; target > 0 is the highest ratio that meets the target.
func (t *table) ratio(row int, what string, a, b []float64, unit func(float64) string, target float64) {
	ma, mb := median(a), median(b)
	r := ma / mb
	l := line{row: row, what: what, nodewatch: unit(ma), other: unit(mb), ratio: fmt.Sprintf("%.2f", r), target: "-", met: "-"}
	if target > 0 {
		l.target, l.met = fmt.Sprintf("≤ %.2f", target), yes(r <= target)
	}
	t.add(l)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func (t *table) print() {
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "row\tmeasure\tnodewatch\tother\tratio\ttarget\tmet")
	for _, l := range t.lines {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.row, l.what, l.nodewatch, l.other, l.ratio, l.target, l.met)
	}
	w.Flush()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile returns the p-th percentile (0 < p ≤ 100) of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func secs(x float64) string { return fmt.Sprintf("%.3f s", x) }
func mib(x float64) string  { return fmt.Sprintf("%.0f MiB", x/(1<<20)) }
func micros(x float64) string {
	return fmt.Sprintf("%.1f µs", x*1e6)
}
func millis(x float64) string { return fmt.Sprintf("%.2f ms", x*1e3) }

func run(ctx context.Context, c config) (*table, error) {
	t := &table{}
	e, err := startEtcd(c.etcd)
	if err != nil {
		return t, err
	}
	defer e.stop()
	fmt.Fprintf(os.Stderr, "etcd at %s; %d pairs per row\n", e.URL, c.pairs)
	for _, r := range []struct {
		n  int
		fn func(context.Context, config, *etcdServer, *table) error
	}{{1, rowSnapshot}, {3, rowLive}, {4, rowLatency}, {5, rowFollower}, {6, rowFanout}} {
		if !c.rows[r.n] && !(r.n == 1 && c.rows[2]) && !(r.n == 3 && c.rows[7]) {
			continue
		}
		if err := r.fn(ctx, c, e, t); err != nil {
			return t, fmt.Errorf("row %d: %w", r.n, err)
		}
	}
	return t, nil
}
