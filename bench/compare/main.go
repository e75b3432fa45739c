//go:build linux

// Command compare is make bench-compare: nodewatch side by side with the
// tool a user would pick instead (etcdctl, built at a pinned version from
// the module proxy), on the same data, in one run, alternated (A B A B …),
// and a table of medians and ratios. CPU is a process's user + system
// time, memory its peak RSS. See BENCHMARKS.md.
//
// The snapshot and live rows run for each shape of data users have (see
// shapes): the simulator's fleet, and node records of about 200 B, 600 B
// and 4 KiB, changed by single puts and by transactions. Every line says
// which shape it measures.
//
// It is also the load for its rows: it writes the records (through the
// simulator, or its own generator for sized records), makes the changes,
// and, run as `compare streams`, is the client that opens 1,000 or
// 10,000 Watch streams on serve (rows 6, 9), or 100 over a large backlog
// (row 10).
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

type config struct {
	nodewatch, etcd, etcdctl string
	pairs                    int
	records, records4k       int // rows 1, 2; records4k for 4 KiB records
	keys                     int // rows 3, 7, 8
	changes, txnChanges      int // rows 3, 7, 8: single puts (or steps); puts in transactions
	writers                  int // rows 3, 8
	modes                    []string
	shapes                   []shape
	variantShapes            map[string]bool // row 8
	profile                  string
	rate                     int // row 4: puts per second
	latencyFor               time.Duration
	latencyDump              string // row 4: a directory for each run's latencies
	streams, conns           int    // row 6
	manyStreams, manyConns   int    // row 9
	updates                  int    // rows 6, 9
	backlogStreams           int    // row 10
	streamsClient            string // rows 6, 9, 10: h2 or grpc (see streamsMain)
	rows                     map[int]bool
}

// quick is what -quick sets, unless given: a run of about 2 minutes on
// the development machine, 600 B records only, fewer of them and fewer
// changes (so no row 7, which follows the simulator's records), and no
// row 9 (10,000 streams, a minute a run).
var quick = map[string]string{"pairs": "3", "records": "20000", "records-4k": "20000", "changes": "10000", "txn-changes": "10000",
	"shapes": "600", "latency-for": "2s", "rows": "1,2,3,4,5,6,7,8,10,11"}

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
	c, err := parseFlags()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		os.Exit(2)
	}
	start := time.Now()
	t, err := run(context.Background(), c)
	t.print()
	fmt.Fprintf(os.Stderr, "compare: %v\n", time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// parseFlags returns the configuration the command line asks for.
func parseFlags() (config, error) {
	var c config
	var rows, modes, shapeList, variantShapes string
	var q bool
	flag.StringVar(&c.nodewatch, "nodewatch", "bin/nodewatch", "the nodewatch binary")
	flag.StringVar(&c.etcd, "etcd", ".bin/etcd", "the etcd binary")
	flag.StringVar(&c.etcdctl, "etcdctl", ".bin/etcdctl", "the etcdctl binary")
	flag.BoolVar(&q, "quick", false, "a run of about 2 minutes, 600 B records only:"+quickFlags()+" (flags given win)")
	flag.IntVar(&c.pairs, "pairs", 3, "alternated pairs (runs, in the live rows) per row")
	flag.StringVar(&shapeList, "shapes", "sim,200,600,4k", "the record shapes: sim (the simulator's), 200, 600, 4k (records of about that many bytes)")
	flag.IntVar(&c.records, "records", 100000, "records for the snapshot rows (1, 2)")
	flag.IntVar(&c.records4k, "records-4k", 50000, "4 KiB records for the snapshot rows (1, 2); fewer than -records, to hold the run to ~15 minutes")
	flag.IntVar(&c.keys, "keys", 1000, "keys changed in the live rows (3, 7, 8)")
	flag.IntVar(&c.changes, "changes", 20000, "changes made as single puts (or simulator steps) per live run (3, 7, 8)")
	flag.IntVar(&c.txnChanges, "txn-changes", 150000, fmt.Sprintf("changes made in transactions of %d puts per live run (3, 8); fewer swing more from run to run, and weigh the tools' start more", txnPuts))
	flag.IntVar(&c.writers, "writers", 8, "writers making the changes at once in the live rows (3, 8)")
	flag.StringVar(&modes, "modes", "puts,txns", "how the live rows (3, 8) write sized records: puts (single), txns (transactions)")
	flag.StringVar(&variantShapes, "variant-shapes", "600", "the shapes (among -shapes) row 8 runs at: no filter, --equals, and a filter keeping none")
	flag.StringVar(&c.profile, "profile", "", "write CPU and allocation profiles of nodewatch in the live rows (3, 7, 8) and of row 2's serve to DIR/<row>-<shape>[-mem].pprof, the last pair's (NODEWATCH_CPUPROFILE, NODEWATCH_MEMPROFILE; profiling adds to its CPU)")
	flag.IntVar(&c.rate, "rate", 1000, "puts per second in the latency row (4)")
	flag.DurationVar(&c.latencyFor, "latency-for", 5*time.Second, "how long each latency run puts (4)")
	flag.StringVar(&c.latencyDump, "latency-dump", "", "write each latency run's puts (index, seconds since the first ack, latency in seconds) into a file in this directory (4)")
	flag.IntVar(&c.streams, "streams", 1000, "Watch streams on serve (6)")
	flag.IntVar(&c.conns, "conns", 10, "connections the streams of row 6 share")
	flag.IntVar(&c.manyStreams, "many-streams", 10000, "Watch streams on serve (9)")
	flag.IntVar(&c.manyConns, "many-conns", 20, "connections the streams of row 9 share")
	flag.IntVar(&c.updates, "updates", 50, "updates fanned out to the streams (6, 9)")
	flag.IntVar(&c.backlogStreams, "backlog-streams", 100, "streams opened at once over a backlog of -records 600 B records (10)")
	flag.StringVar(&c.streamsClient, "streams-client", "h2", "the client of the streams of rows 6, 9 and 10: h2 (a light one: one goroutine per connection) or grpc (grpc-go's, which costs more CPU per event than serve)")
	flag.StringVar(&rows, "rows", "1,2,3,4,5,6,7,8,9,10,11", "the rows to run: 1 key --once, 2 nodes --once via serve, 3 live with --filter, 4 latency, "+
		"5 follower (Go benchmark), 6 serve fan-out (1,000 streams), 7 live nodes via serve, 8 live without a filter, with --equals, and keeping none, "+
		"9 serve fan-out (10,000 streams), 10 serve's backlog to many new streams at once, 11 key --once of one record into a pipe")
	flag.Parse()
	if q {
		given := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range quick {
			if !given[name] {
				if err := flag.Set(name, v); err != nil {
					return c, err
				}
			}
		}
	}
	var err error
	if c.shapes, err = parseShapes(shapeList); err != nil {
		return c, fmt.Errorf("-shapes: %v", err)
	}
	vs, err := parseShapes(variantShapes)
	if err != nil {
		return c, fmt.Errorf("-variant-shapes: %v", err)
	}
	c.variantShapes = map[string]bool{}
	for _, s := range vs {
		c.variantShapes[s.name] = true
	}
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); m != puts && m != txns {
			return c, fmt.Errorf("-modes: unknown mode %q (want puts or txns)", m)
		}
		c.modes = append(c.modes, m)
	}
	c.rows = map[int]bool{}
	for _, r := range strings.Split(rows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil {
			return c, fmt.Errorf("-rows: %v", err)
		}
		c.rows[n] = true
	}
	if c.profile != "" {
		if c.profile, err = filepath.Abs(c.profile); err != nil {
			return c, err
		}
		if err := os.MkdirAll(c.profile, 0o755); err != nil {
			return c, err
		}
	}
	return c, nil
}

// quickFlags is what -quick sets, as flags: " -changes 10000 …".
func quickFlags() string {
	var s string
	for _, name := range slices.Sorted(maps.Keys(quick)) {
		s += " -" + name + " " + quick[name]
	}
	return s
}

// recordsOf is how many records of shape s the snapshot rows list.
func (c config) recordsOf(s shape) int {
	if s.size >= 4096 {
		return c.records4k
	}
	return c.records
}

// hasShape reports whether the shape named name is to be measured.
func (c config) hasShape(name string) bool {
	return slices.ContainsFunc(c.shapes, func(s shape) bool { return s.name == name })
}

// thousands formats n with thousands separators: 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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

// ratio adds the medians of a (nodewatch) and b (the other tool) and
// their ratio; target > 0 is the highest ratio that meets the target.
func (t *table) ratio(row int, what string, a, b []float64, unit func(float64) string, target float64) {
	t.add(ratioLine(row, what, a, b, unit, target))
}

// recorded is ratio for a figure with no target, recorded to follow it.
func (t *table) recorded(row int, what string, a, b []float64, unit func(float64) string) {
	l := ratioLine(row, what, a, b, unit, 0)
	l.target = "recorded"
	t.add(l)
}

func ratioLine(row int, what string, a, b []float64, unit func(float64) string, target float64) line {
	ma, mb := median(a), median(b)
	r := ma / mb
	l := line{row: row, what: what, nodewatch: unit(ma), other: unit(mb), ratio: fmt.Sprintf("%.2f", r), target: "-", met: "-"}
	if target > 0 {
		l.target, l.met = fmt.Sprintf("≤ %.2f", target), yes(r <= target)
	}
	return l
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
	// By row; within a row, in the order measured (by shape).
	lines := slices.Clone(t.lines)
	slices.SortStableFunc(lines, func(a, b line) int { return a.row - b.row })
	for _, l := range lines {
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
func kib(x float64) string    { return fmt.Sprintf("%.1f KiB", x/(1<<10)) }

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
	}{{1, rowSnapshot}, {3, rowLive}, {4, rowLatency}, {5, rowFollower},
		{6, rowFanout1k}, {9, rowFanout10k}, {10, rowBacklog}, {11, rowOne}} {
		if !c.rows[r.n] && !(r.n == 1 && c.rows[2]) && !(r.n == 3 && (c.rows[7] || c.rows[8])) {
			continue
		}
		if err := r.fn(ctx, c, e, t); err != nil {
			return t, fmt.Errorf("row %d: %w", r.n, err)
		}
	}
	return t, nil
}
