//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/sim"
)

// populate empties prefix and writes n simulated node records under it;
// it returns the records' bytes (keys and values).
func populate(ctx context.Context, e *etcdServer, prefix string, n int, seed int64) (*sim.Sim, int64, error) {
	if _, err := e.client.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return nil, 0, err
	}
	s := sim.New(sim.Config{Nodes: n, Seed: seed, Prefix: prefix})
	if err := s.Populate(ctx, e.client); err != nil {
		return nil, 0, err
	}
	var total int64
	key, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		resp, err := e.client.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(10000))
		if err != nil {
			return nil, 0, err
		}
		for _, kv := range resp.Kvs {
			total += int64(len(kv.Key) + len(kv.Value))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return s, total, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// rowSnapshot: rows 1 and 2, the initial listing of the records of each
// shape, printed once, by nodewatch (key; nodes through serve) and by
// etcdctl get.
func rowSnapshot(ctx context.Context, c config, e *etcdServer, t *table) error {
	for _, s := range c.shapes {
		if err := snapshotShape(ctx, c, e, t, s); err != nil {
			return fmt.Errorf("%s: %w", s.label(), err)
		}
	}
	return nil
}

// load empties prefix and writes n records of shape s under it; it
// returns their bytes (keys and values).
func load(ctx context.Context, e *etcdServer, prefix string, s shape, n int, seed int64) (int64, error) {
	var size int64
	var err error
	if s.size == 0 {
		_, size, err = populate(ctx, e, prefix, n, seed)
	} else {
		_, size, err = writeFleet(ctx, e, prefix, n, s.size, seed, false)
	}
	if err != nil {
		return 0, err
	}
	// Compacted, so that a listing does not step over the deleted
	// records of the shapes before.
	return size, e.compact(ctx)
}

// snapshotShape: rows 1 and 2 for the records of one shape.
func snapshotShape(ctx context.Context, c config, e *etcdServer, t *table, s shape) error {
	const prefix = "/nodes/"
	n := c.recordsOf(s)
	start := time.Now()
	size, err := load(ctx, e, prefix, s, n, 1)
	if err != nil {
		return err
	}
	of := fmt.Sprintf("%s (%s)", s.label(), thousands(n))
	fmt.Fprintf(os.Stderr, "rows 1, 2: %s, %.1f MB, written in %v\n", of, float64(size)/1e6, time.Since(start).Round(time.Second/10))
	// etcdctl gives up a request after 5 s unless told otherwise, as a
	// user listing large records must.
	etcdctl := func() (usage, error) {
		return measure(c.etcdctl, "--endpoints", e.URL, "--command-timeout", "10m", "get", "--prefix", prefix, "-w", "json")
	}
	if c.rows[1] {
		var nwWall, nwRSS, ecWall, ecRSS []float64
		for range c.pairs {
			a, err := measure(c.nodewatch, "key", "--etcd", e.URL, "--prefix", prefix, "--once")
			if err != nil {
				return err
			}
			b, err := etcdctl()
			if err != nil {
				return err
			}
			nwWall, ecWall = append(nwWall, a.wall.Seconds()), append(ecWall, b.wall.Seconds())
			nwRSS, ecRSS = append(nwRSS, float64(a.maxRSS)), append(ecRSS, float64(b.maxRSS))
		}
		t.ratio(1, "key --once vs etcdctl get -w json, "+of+": wall", nwWall, ecWall, secs, 0.8)
		t.ratio(1, "key --once vs etcdctl get -w json, "+of+": peak RSS", nwRSS, ecRSS, mib, 0.25)
	}
	if !c.rows[2] {
		return nil
	}
	srv, addr, err := startServe(c, e, prefix, c.profileEnv(2, s.name+"-serve"))
	if err != nil {
		return err
	}
	nodes := func() (usage, error) {
		return measure(c.nodewatch, "nodes", "--curator", addr, "--once", "--dial-timeout", "60s")
	}
	if _, err := nodes(); err != nil { // serve has listed etcd
		srv.stop()
		return err
	}
	var nwWall, ecWall []float64
	for range c.pairs {
		a, err := nodes()
		if err != nil {
			srv.stop()
			return err
		}
		b, err := etcdctl()
		if err != nil {
			srv.stop()
			return err
		}
		nwWall, ecWall = append(nwWall, a.wall.Seconds()), append(ecWall, b.wall.Seconds())
	}
	peak, err := hwm(srv.cmd.Process.Pid)
	srv.stop()
	if err != nil {
		return err
	}
	t.ratio(2, "nodes --once via serve vs etcdctl get -w json, "+of+": wall", nwWall, ecWall, secs, 1.0)
	r := float64(peak) / float64(size)
	t.add(line{row: 2, what: "serve peak RSS / records' bytes, " + of, nodewatch: mib(float64(peak)), other: mib(float64(size)) + " of records",
		ratio: fmt.Sprintf("%.2f", r), target: "≤ 3.00", met: yes(r <= 3)})
	return nil
}

// startServe starts `nodewatch serve` for the records under prefix, on a
// free loopback port, with env added to its environment and args to its
// command line, and returns it with its address.
func startServe(c config, e *etcdServer, prefix string, env []string, args ...string) (*follower, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srv, err := startFollowerEnv("serve", env, nil, nil, c.nodewatch, append([]string{"serve", "--etcd", e.URL, "--prefix", prefix, "--listen", addr}, args...)...)
	return srv, addr, err
}

// Markers: records the live rows put to learn that a follower is
// following (ready) and has seen every change (finish). The keys are 15
// bytes long, so that their base64 (etcdctl -w json) has no padding and
// each is found in etcdctl's output as it is in nodewatch's.
const (
	livePrefix  = "/live/"
	readyID     = "zz-ready-"
	finishID    = "zz-finish"
	readyMarkB  = "/live/zz-ready-"
	finishMarkB = "/live/zz-finish"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// putMarker writes a node record for id under livePrefix.
func putMarker(ctx context.Context, e *etcdServer, id string) error {
	v, err := curator.EncodeRecord(&apipb.Node{Id: id, State: commonpb.NodeState_NODE_STATE_UP})
	if err != nil {
		return err
	}
	_, err = e.client.Put(ctx, livePrefix+id, string(v))
	return err
}

// ready puts ready markers until every follower has printed one: from
// then on, each follows live changes.
func ready(ctx context.Context, e *etcdServer, marks []string, fs ...*follower) error {
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		if err := putMarker(ctx, e, fmt.Sprintf("%s%d", readyID, i)); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
		all := true
		for j, f := range fs {
			all = all && f.count(marks[j]) > 0
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("followers not following after 2m")
		}
	}
}

var seqRe = regexp.MustCompile(`"seq":(\d+)`)

// rowLatency: row 4, put acknowledged → its line on stdout, at c.rate
// puts per second, nodewatch with a --filter and etcdctl watch, one after
// the other, alternated.
func rowLatency(ctx context.Context, c config, e *etcdServer, t *table) error {
	var nwP99, ecP99, nwP50, ecP50 []float64
	for run := range c.pairs {
		for _, tool := range []string{"nodewatch", "etcdctl"} {
			p50, p99, err := latencyRun(ctx, c, e, tool)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "row 4, %s, run %d: p50 %s, p99 %s\n", tool, run+1, millis(p50), millis(p99))
			if tool == "nodewatch" {
				nwP50, nwP99 = append(nwP50, p50), append(nwP99, p99)
			} else {
				ecP50, ecP99 = append(ecP50, p50), append(ecP99, p99)
			}
		}
	}
	t.ratio(4, fmt.Sprintf("put acked → line, %d puts/s of ~40 B JSON values on 1,000 keys: p50", c.rate), nwP50, ecP50, millis, 0)
	t.ratio(4, fmt.Sprintf("put acked → line, %d puts/s of ~40 B JSON values on 1,000 keys: p99", c.rate), nwP99, ecP99, millis, 1.0)
	return nil
}

func latencyRun(ctx context.Context, c config, e *etcdServer, tool string) (p50, p99 float64, err error) {
	const prefix = "/lat/"
	if _, err := e.client.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return 0, 0, err
	}
	n := int(c.latencyFor.Seconds() * float64(c.rate))
	acked := make([]time.Time, n)
	seen := make([]time.Time, n)
	var mu sync.Mutex
	onLine := func(line []byte, at time.Time) {
		m := seqRe.FindSubmatch(line)
		if m == nil {
			return
		}
		i, err := strconv.Atoi(string(m[1]))
		if err != nil || i >= n {
			return
		}
		mu.Lock()
		if seen[i].IsZero() {
			seen[i] = at
		}
		mu.Unlock()
	}
	var f *follower
	if tool == "nodewatch" {
		f, err = startFollower(tool, []string{"ready"}, onLine, c.nodewatch, "key", "--etcd", e.URL, "--prefix", prefix, "--filter", `.value.state == "NODE_STATE_UP"`)
	} else {
		f, err = startFollower(tool, []string{"ready"}, onLine, c.etcdctl, "--endpoints", e.URL, "watch", "--prefix", prefix)
	}
	if err != nil {
		return 0, 0, err
	}
	defer f.stop()
	for i := 0; f.count("ready") == 0; i++ {
		if _, err := e.client.Put(ctx, prefix+"ready", fmt.Sprintf(`{"state":"NODE_STATE_UP","ready":%d}`, i)); err != nil {
			return 0, 0, err
		}
		time.Sleep(100 * time.Millisecond)
		if i > 1200 {
			return 0, 0, fmt.Errorf("%s not following after 2m", tool)
		}
	}
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var putErr error
	for i := range n {
		<-tick.C
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := e.client.Put(ctx, fmt.Sprintf("%sk%03d", prefix, i%1000), fmt.Sprintf(`{"state":"NODE_STATE_UP","seq":%d}`, i))
			mu.Lock()
			defer mu.Unlock()
			acked[i] = time.Now()
			if err != nil && putErr == nil {
				putErr = err
			}
		}()
	}
	wg.Wait()
	if putErr != nil {
		return 0, 0, putErr
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		missing := 0
		for _, s := range seen {
			if s.IsZero() {
				missing++
			}
		}
		var lat []float64
		if missing == 0 {
			for i := range n {
				lat = append(lat, seen[i].Sub(acked[i]).Seconds())
			}
		}
		mu.Unlock()
		if missing == 0 {
			if c.latencyDump != "" {
				var b strings.Builder
				for i := range n {
					fmt.Fprintf(&b, "%d %.6f %.6f\n", i, acked[i].Sub(acked[0]).Seconds(), lat[i])
				}
				if err := os.WriteFile(filepath.Join(c.latencyDump, fmt.Sprintf("%s-%d", tool, time.Now().UnixNano())), []byte(b.String()), 0o644); err != nil {
					return 0, 0, err
				}
			}
			return percentile(lat, 50), percentile(lat, 99), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%s: %d of %d puts never printed", tool, missing, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var benchRe = regexp.MustCompile(`(?m)^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op`)

// rowFollower: row 5, the follower against a full-rescan follower, one
// changed id per batch in a set of 100,000 (Go benchmarks).
func rowFollower(ctx context.Context, c config, e *etcdServer, t *table) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkFollower(OneChange|Rescan)(1k|100k)$", "-benchmem", "-count", strconv.Itoa(c.pairs), "./internal/view")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -bench: %v\n%s", err, out.String())
	}
	ns := map[string][]float64{}
	allocs := map[string]float64{}
	for _, m := range benchRe.FindAllStringSubmatch(out.String(), -1) {
		x, _ := strconv.ParseFloat(m[2], 64)
		ns[m[1]] = append(ns[m[1]], x*1e-9)
		a, _ := strconv.ParseFloat(m[4], 64)
		allocs[m[1]] = a
	}
	for _, size := range []string{"1k", "100k"} {
		a, b := ns["BenchmarkFollowerOneChange"+size], ns["BenchmarkFollowerRescan"+size]
		if len(a) == 0 || len(b) == 0 {
			return fmt.Errorf("benchmarks missing from:\n%s", out.String())
		}
		// A speed-up, not a ratio of costs: "how many times faster".
		ma, mb := median(a), median(b)
		l := line{row: 5, what: "one change per batch in a set of " + size + " ids (Go benchmark): follower vs full rescan", nodewatch: micros(ma), other: micros(mb),
			ratio: fmt.Sprintf("%.0f× faster", mb/ma), target: "-", met: "-"}
		if size == "100k" {
			l.target, l.met = "≥ 1000× faster", yes(mb/ma >= 1000)
		}
		t.add(l)
	}
	a1, a2 := allocs["BenchmarkFollowerOneChange1k"], allocs["BenchmarkFollowerOneChange100k"]
	t.add(line{row: 5, what: "allocations per batch, 100k vs 1k ids (Go benchmark)", nodewatch: fmt.Sprintf("%.0f vs %.0f", a2, a1), ratio: "-", target: "equal", met: yes(a1 == a2)})
	return nil
}

// rowFanout1k: row 6, serve with c.streams (1,000) Watch streams over
// c.conns connections.
func rowFanout1k(ctx context.Context, c config, e *etcdServer, t *table) error {
	return rowFanout(ctx, c, e, t, 6, c.streams, c.conns, 0.050)
}

// rowFanout10k: row 9, serve with c.manyStreams (10,000) Watch streams
// over c.manyConns connections (issue 24).
func rowFanout10k(ctx context.Context, c config, e *etcdServer, t *table) error {
	return rowFanout(ctx, c, e, t, 9, c.manyStreams, c.manyConns, 0.100)
}

// maxIdleStream is the most memory an idle Watch stream may cost serve
// (issue 24).
const maxIdleStream = 20 << 10

// rowFanout is row (6 or 9): serve with streams Watch streams over conns
// connections from one client process; an update reaching all of them,
// against p99Target (seconds), and what the streams cost serve in memory.
// Each run has a serve of its own.
func rowFanout(ctx context.Context, c config, e *etcdServer, t *table, row, streams, conns int, p99Target float64) error {
	const prefix = "/fan/"
	if _, _, err := populate(ctx, e, prefix, 100, 3); err != nil {
		return err
	}
	before, err := e.watchers()
	if err != nil {
		return err
	}
	var p50s, p99s, opens, rssBefore, rssIdle, peaks, perStream, serveCPU, clientCPU []float64
	watches := 0
	for i := range c.pairs {
		start := time.Now()
		res, err := streamsRun(ctx, c, e, prefix, streams, conns, "-updates", strconv.Itoa(c.updates))
		if err != nil {
			return err
		}
		w := res.Watchers - before
		if i == 0 || w != 1 {
			watches = w
		}
		per := float64(res.RSSIdle-res.RSSBefore) / float64(streams)
		p50s, p99s, opens = append(p50s, res.P50), append(p99s, res.P99), append(opens, res.Open)
		rssBefore, rssIdle, peaks = append(rssBefore, float64(res.RSSBefore)), append(rssIdle, float64(res.RSSIdle)), append(peaks, float64(res.Peak))
		perStream = append(perStream, per)
		serveCPU, clientCPU = append(serveCPU, res.ServeCPU), append(clientCPU, res.ClientCPU)
		fmt.Fprintf(os.Stderr, "row %d, %d streams, run %d: p50 %s p99 %s, opened in %s; serve RSS %s before, %s idle (%s per stream), peak %s; CPU per update and stream: serve %s, client %s; in %v\n",
			row, streams, i+1, millis(res.P50), millis(res.P99), secs(res.Open), mib(float64(res.RSSBefore)), mib(float64(res.RSSIdle)), kib(per), mib(float64(res.Peak)),
			micros(res.ServeCPU), micros(res.ClientCPU), time.Since(start).Round(time.Second/10))
	}
	of := fmt.Sprintf("%s streams over %d connections, 100 sim records", thousands(streams), conns)
	t.add(line{row: row, what: "update → all " + of + ": p50", nodewatch: millis(median(p50s)), ratio: "-", target: "-", met: "-"})
	p99 := median(p99s)
	t.add(line{row: row, what: "update → all " + of + ": p99", nodewatch: millis(p99), ratio: "-", target: fmt.Sprintf("≤ %.0f ms", p99Target*1e3), met: yes(p99 <= p99Target)})
	t.add(line{row: row, what: "serve CPU per update and stream (this client's beside it), " + of, nodewatch: micros(median(serveCPU)),
		other: micros(median(clientCPU)) + " (client)", ratio: "-", target: "recorded", met: "-"})
	t.add(line{row: row, what: "etcd watches opened by serve, " + of, nodewatch: strconv.Itoa(watches), ratio: "-", target: "1", met: yes(watches == 1)})
	t.add(line{row: row, what: "streams opened until each has its backlog, " + of, nodewatch: secs(median(opens)), ratio: "-", target: "recorded", met: "-"})
	t.add(line{row: row, what: "serve RSS before the streams / with them open and idle / peak, " + of,
		nodewatch: fmt.Sprintf("%.0f / %.0f / %.0f MiB", median(rssBefore)/(1<<20), median(rssIdle)/(1<<20), median(peaks)/(1<<20)), ratio: "-", target: "recorded", met: "-"})
	per := median(perStream)
	t.add(line{row: row, what: "serve memory per idle stream, (idle − before) ÷ streams, " + of, nodewatch: kib(per), ratio: "-",
		target: kib(maxIdleStream), met: yes(per <= maxIdleStream)})
	return nil
}

// rowBacklog: row 10, c.backlogStreams Watch streams opened at once on a
// serve holding c.records records of 600 B: what serve's memory peaks at
// beyond what it held before, against the size of one backlog. Each
// stream is sent every record; the peak must stay far below the
// backlog's size times the streams.
func rowBacklog(ctx context.Context, c config, e *etcdServer, t *table) error {
	const prefix, conns = "/backlog/", 10
	s := shape{"600", 600}
	start := time.Now()
	size, err := load(ctx, e, prefix, s, c.records, 4)
	if err != nil {
		return err
	}
	defer func() {
		if _, err := e.client.Delete(ctx, prefix, clientv3.WithPrefix()); err == nil {
			e.compact(ctx)
		}
	}()
	of := fmt.Sprintf("%d streams at once over a backlog of %s %s", c.backlogStreams, thousands(c.records), s.label())
	fmt.Fprintf(os.Stderr, "row 10: %s records, %.1f MB, written in %v\n", thousands(c.records), float64(size)/1e6, time.Since(start).Round(time.Second/10))
	var grew, opens, rssBefore, ratios []float64
	var backlog int64
	for i := range c.pairs {
		start := time.Now()
		res, err := streamsRun(ctx, c, e, prefix, c.backlogStreams, conns, "-updates", "0", "-raw")
		if err != nil {
			return err
		}
		g := float64(res.Peak - res.RSSBefore)
		grew, opens, rssBefore = append(grew, g), append(opens, res.Open), append(rssBefore, float64(res.RSSBefore))
		ratios = append(ratios, g/float64(res.Backlog))
		backlog = res.Backlog
		fmt.Fprintf(os.Stderr, "row 10, run %d: serve RSS %s before, peak %s (+%s, %.1f× one backlog of %s); every backlog sent in %s; in %v\n",
			i+1, mib(float64(res.RSSBefore)), mib(float64(res.Peak)), mib(g), g/float64(res.Backlog), mib(float64(res.Backlog)), secs(res.Open), time.Since(start).Round(time.Second/10))
	}
	r := median(ratios)
	t.add(line{row: 10, what: of + ": serve peak RSS − RSS before, vs one backlog", nodewatch: mib(median(grew)), other: mib(float64(backlog)) + " (one backlog)",
		ratio: fmt.Sprintf("%.1f×", r), target: fmt.Sprintf("≤ %d× (≪ %d×)", maxBacklogGrowth, c.backlogStreams), met: yes(r <= maxBacklogGrowth)})
	t.add(line{row: 10, what: of + ": serve RSS before the streams (the records held)", nodewatch: mib(median(rssBefore)), ratio: "-", target: "recorded", met: "-"})
	t.add(line{row: 10, what: of + ": until every stream has its backlog", nodewatch: secs(median(opens)), ratio: "-", target: "recorded", met: "-"})
	return nil
}

// maxBacklogGrowth is the most that serve's memory may grow, in backlogs,
// while it sends its backlog to many streams at once: "far below" one
// backlog per stream.
const maxBacklogGrowth = 10

// streamsRun starts serve for the records under prefix, with the limits
// that let streams streams over conns connections in, and runs `compare
// streams` against it with args added.
func streamsRun(ctx context.Context, c config, e *etcdServer, prefix string, streams, conns int, args ...string) (streamsResult, error) {
	perConn := (streams + conns - 1) / conns
	srv, addr, err := startServe(c, e, prefix, nil, "--max-streams", strconv.Itoa(streams), "--max-streams-per-conn", strconv.Itoa(perConn))
	if err != nil {
		return streamsResult{}, err
	}
	defer srv.stop()
	self, err := os.Executable()
	if err != nil {
		return streamsResult{}, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"streams", "-curator", addr, "-etcd", e.URL, "-prefix", prefix,
		"-streams", strconv.Itoa(streams), "-conns", strconv.Itoa(conns), "-serve-pid", strconv.Itoa(srv.cmd.Process.Pid), "-client", c.streamsClient}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return streamsResult{}, fmt.Errorf("streams client: %v (serve: %q)", err, srv.stderrText())
	}
	var res streamsResult
	if err := json.NewDecoder(bufio.NewReader(&out)).Decode(&res); err != nil {
		return res, fmt.Errorf("streams client said %q: %v", out.String(), err)
	}
	return res, nil
}

// fanMarker is the id of the record the streams client updates.
const fanMarker = "zzzzzzzz-fan"
