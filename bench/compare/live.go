//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// How the live rows' changes reach etcd, as the writers users have write
// them: an agent per node puts its own record (puts), a controller or
// mgmt writes many records in one transaction, one revision (txns). The
// simulator's shape keeps its own: its steps, one at a time.
const (
	puts = "puts"
	txns = "txns"
	// txnPuts is the puts in one transaction.
	txnPuts = 50
)

// filterUp is the filter a user writes to follow the UP nodes; it
// selects about half of the sized records.
const filterUp = `.value.state == "NODE_STATE_UP"`

// variant is how nodewatch key follows a live run, besides
// --changes-only.
type variant struct {
	name string // in a profile's file name
	desc string // in the table
	args []string
}

var (
	withFilter = variant{"", "key --changes-only --filter", []string{"--filter", filterUp}}
	noFilter   = variant{"nofilter", "key --changes-only (no filter)", nil}
	// withEquals prints only the changes of the state; the heartbeats
	// and re-puts of a record it selects are not `updated`.
	withEquals = variant{"equals", "key --changes-only --equals .value.state --filter", []string{"--equals", ".value.state", "--filter", filterUp}}
	// keepsNone is the cost of following alone: every change received,
	// decoded and filtered, none printed. The filter keeps only the
	// markers, the records without roles, and reads no more of a record
	// than row 3's does. What row 3 spends beyond it is the view's and
	// the output's.
	keepsNone = variant{"none", "key --changes-only --filter keeping none (following alone)", []string{"--filter", `.value | has("roles") | not`}}
)

// liveCase is one kind of live run: its records, how they change, how
// nodewatch follows them, and the figures of its runs so far.
type liveCase struct {
	row          int
	shape        shape
	mode         string // puts or txns; "" for the simulator's steps
	variant      variant
	nwCPU, ecCPU []float64 // CPU per change, one per run
	nwRSS, ecRSS []float64 // peak RSS in bytes, one per run
}

// name names lc in a profile's file name: 600-txns-equals.
func (lc *liveCase) name() string {
	parts := []string{lc.shape.name}
	for _, p := range []string{lc.mode, lc.variant.name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "-")
}

// changes is how many changes a run of lc makes: whole transactions.
func (lc *liveCase) changes(c config) int {
	if lc.mode == txns {
		return c.txnChanges / txnPuts * txnPuts
	}
	return c.changes
}

// what is lc's line in the table.
func (lc *liveCase) what(c config) string {
	n := thousands(lc.changes(c))
	how := map[string]string{
		"":   n + " simulator steps",
		puts: fmt.Sprintf("%s single puts (%d writers)", n, c.writers),
		txns: fmt.Sprintf("%s puts in txns of %d (%d writers)", n, txnPuts, c.writers),
	}[lc.mode]
	return fmt.Sprintf("CPU per change, %s, %s on %s keys: %s vs etcdctl watch -w json", lc.shape.label(), how, thousands(c.keys), lc.variant.desc)
}

// liveCases are the runs of rows 3 (--filter, every shape and write
// mode) and 8 (no filter, --equals, and a filter that keeps none, at
// c.variantShapes).
func liveCases(c config) []*liveCase {
	var cs []*liveCase
	for _, s := range c.shapes {
		switch {
		case !c.rows[3]:
		case s.size == 0:
			cs = append(cs, &liveCase{row: 3, shape: s, variant: withFilter})
		default:
			for _, m := range c.modes {
				cs = append(cs, &liveCase{row: 3, shape: s, mode: m, variant: withFilter})
			}
		}
	}
	for _, s := range c.shapes {
		if !c.rows[8] || s.size == 0 || !c.variantShapes[s.name] {
			continue
		}
		for _, m := range c.modes {
			for _, v := range []variant{noFilter, withEquals, keepsNone} {
				cs = append(cs, &liveCase{row: 8, shape: s, mode: m, variant: v})
			}
		}
	}
	return cs
}

// rowLive: rows 3, 7 and 8, following c.keys records as they change, by
// nodewatch key and etcdctl watch -w json at the same time (3, 8), and by
// nodes through serve (7, the simulator's shape); every kind of run once
// per pair, in turn.
func rowLive(ctx context.Context, c config, e *etcdServer, t *table) error {
	cases := liveCases(c)
	nodesToo := c.rows[7] && c.hasShape("sim")
	if c.rows[7] && !nodesToo {
		fmt.Fprintln(os.Stderr, "row 7: not run: it follows the simulator's records (-shapes sim)")
	}
	if c.rows[8] && !slices.ContainsFunc(cases, func(lc *liveCase) bool { return lc.row == 8 }) {
		fmt.Fprintln(os.Stderr, "row 8: not run: none of -shapes is among -variant-shapes")
	}
	var serveCPU, nodesCPU []float64
	for i := range c.pairs {
		for _, lc := range cases {
			start := time.Now()
			nw, ec, err := liveRun(ctx, c, e, lc, int64(i))
			if err != nil {
				return fmt.Errorf("%s: %w", lc.name(), err)
			}
			lc.nwCPU, lc.ecCPU = append(lc.nwCPU, nw.perChange), append(lc.ecCPU, ec.perChange)
			lc.nwRSS, lc.ecRSS = append(lc.nwRSS, nw.maxRSS), append(lc.ecRSS, ec.maxRSS)
			// The run's ratio to three places, for alternations of two
			// builds (the table rounds to two).
			fmt.Fprintf(os.Stderr, "row %d, %s, run %d: %s, %s per change (ratio %.3f), peak RSS %s, %s, page faults %d, %d, in %v\n", lc.row, lc.name(), i+1,
				micros(nw.perChange), micros(ec.perChange), nw.perChange/ec.perChange, mib(nw.maxRSS), mib(ec.maxRSS), nw.faults, ec.faults, time.Since(start).Round(time.Second/10))
		}
		if nodesToo {
			start := time.Now()
			su, nu, err := nodesRun(ctx, c, e, int64(i))
			if err != nil {
				return err
			}
			serveCPU, nodesCPU = append(serveCPU, su), append(nodesCPU, nu)
			fmt.Fprintf(os.Stderr, "row 7, sim, run %d: serve %s, nodes %s per change, in %v\n", i+1, micros(su), micros(nu), time.Since(start).Round(time.Second/10))
		}
	}
	var simEtcdctl []float64
	for _, lc := range cases {
		if lc.row == 3 {
			t.ratio(3, lc.what(c), lc.nwCPU, lc.ecCPU, micros, 0.5)
			// No target of the issue's, but nodewatch means to use less
			// memory than etcdctl, following the same changes.
			t.recorded(3, "peak RSS, "+strings.TrimPrefix(lc.what(c), "CPU per change, "), lc.nwRSS, lc.ecRSS, mib)
		} else {
			t.recorded(lc.row, lc.what(c), lc.nwCPU, lc.ecCPU, micros)
		}
		if lc.shape.size == 0 {
			simEtcdctl = lc.ecCPU
		}
	}
	if !nodesToo {
		return nil
	}
	ec := median(simEtcdctl)
	for _, x := range []struct {
		what string
		cpu  []float64
	}{{"serve", serveCPU}, {"nodes --changes-only --filter", nodesCPU}} {
		l := line{row: 7, what: "CPU per change, sim records, row 3's changes: " + x.what, nodewatch: micros(median(x.cpu)), target: "recorded", met: "-"}
		if ec > 0 {
			l.other, l.ratio = micros(ec)+" (etcdctl, row 3)", fmt.Sprintf("%.2f", median(x.cpu)/ec)
		}
		t.add(l)
	}
	return nil
}

// prepare writes c.keys records of shape s under livePrefix and returns
// what makes a run's n changes to them.
func prepare(ctx context.Context, c config, e *etcdServer, s shape, mode string, n int, seed int64) (func() error, error) {
	if s.size == 0 {
		sm, _, err := populate(ctx, e, livePrefix, c.keys, seed)
		return func() error { return sm.RunSteps(ctx, e.client, 0, 0, int64(n)) }, err
	}
	nodes, _, err := writeFleet(ctx, e, livePrefix, c.keys, s.size, seed, true)
	return func() error { return writeChanges(ctx, e, livePrefix, nodes, mode, n, c.writers, seed) }, err
}

// liveUsage is what one follower of a live run used.
type liveUsage struct {
	perChange float64 // CPU seconds per change
	maxRSS    float64 // bytes
	faults    int64   // minor page faults
}

// liveRun is one run of lc: its records written, nodewatch key and
// etcdctl watch started, the changes made and seen by both; it returns
// each one's CPU per change and peak RSS.
func liveRun(ctx context.Context, c config, e *etcdServer, lc *liveCase, seed int64) (nw, ec liveUsage, err error) {
	n := lc.changes(c)
	change, err := prepare(ctx, c, e, lc.shape, lc.mode, n, seed)
	if err != nil {
		return nw, ec, err
	}
	args := append([]string{"key", "--etcd", e.URL, "--prefix", livePrefix, "--changes-only"}, lc.variant.args...)
	nwf, err := startFollowerEnv("nodewatch key", c.profileEnv(lc.row, lc.name()), []string{readyID, finishID}, nil, c.nodewatch, args...)
	if err != nil {
		return nw, ec, err
	}
	ecf, err := startFollower("etcdctl watch", []string{b64(readyMarkB), b64(finishMarkB)}, nil, c.etcdctl, "--endpoints", e.URL, "watch", "--prefix", livePrefix, "-w", "json")
	if err != nil {
		nwf.stop()
		return nw, ec, err
	}
	a, b, err := follow(ctx, e, change, []string{readyID, b64(readyMarkB)}, []string{finishID, b64(finishMarkB)}, nwf, ecf)
	if err != nil {
		return nw, ec, err
	}
	per := func(u usage) liveUsage { return liveUsage{u.cpu.Seconds() / float64(n), float64(u.maxRSS), u.faults} }
	return per(a), per(b), nil
}

// nodesRun is one run of row 7: row 3's simulator changes, followed by
// nodes --changes-only --filter through serve; it returns the CPU per
// change of serve and of nodes.
func nodesRun(ctx context.Context, c config, e *etcdServer, seed int64) (serve, nodes float64, err error) {
	change, err := prepare(ctx, c, e, shapes[0], "", c.changes, seed)
	if err != nil {
		return 0, 0, err
	}
	srv, addr, err := startServe(c, e, livePrefix, c.profileEnv(7, "sim-serve"))
	if err != nil {
		return 0, 0, err
	}
	nf, err := startFollowerEnv("nodewatch nodes", c.profileEnv(7, "sim-nodes"), []string{readyID, finishID}, nil, c.nodewatch, "nodes", "--curator", addr, "--dial-timeout", "60s",
		"--changes-only", "--filter", `.state == "NODE_STATE_UP"`)
	if err != nil {
		srv.stop()
		return 0, 0, err
	}
	nu, _, err := follow(ctx, e, change, []string{readyID}, []string{finishID}, nf)
	su, serr := srv.stop()
	if err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	return su.cpu.Seconds() / float64(c.changes), nu.cpu.Seconds() / float64(c.changes), nil
}

// follow waits until every follower follows, makes the changes, waits
// until every follower has printed the finish marker, stops them and
// returns the usage of the first two.
func follow(ctx context.Context, e *etcdServer, change func() error, readyMarks, finishMarks []string, fs ...*follower) (usage, usage, error) {
	stopAll := func() []usage {
		var us []usage
		for _, f := range fs {
			u, _ := f.stop()
			us = append(us, u)
		}
		return us
	}
	if err := ready(ctx, e, readyMarks, fs...); err != nil {
		stopAll()
		return usage{}, usage{}, err
	}
	if err := change(); err != nil {
		stopAll()
		return usage{}, usage{}, err
	}
	if err := putMarker(ctx, e, finishID); err != nil {
		stopAll()
		return usage{}, usage{}, err
	}
	for i, f := range fs {
		if err := f.waitFor(finishMarks[i], 5*time.Minute); err != nil {
			stopAll()
			return usage{}, usage{}, err
		}
	}
	us := append(stopAll(), usage{}, usage{})
	return us[0], us[1], nil
}

// writeChanges makes n changes to nodes (under prefix) from writers
// writers at once, each changing records of its own: single puts, or
// (mode txns) transactions of txnPuts puts to distinct records.
func writeChanges(ctx context.Context, e *etcdServer, prefix string, nodes []*apipb.Node, mode string, n, writers int, seed int64) error {
	per := 1
	if mode == txns {
		per = txnPuts
	}
	if len(nodes)/writers < per {
		return fmt.Errorf("%d records for %d writers: fewer than the %d puts of a transaction each (-keys, -writers)", len(nodes), writers, per)
	}
	units := n / per // puts or transactions
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		var own []*apipb.Node
		for i := w; i < len(nodes); i += writers {
			own = append(own, nodes[i])
		}
		ch, err := newChanger(prefix, own, seed*int64(writers)+int64(w))
		if err != nil {
			errs <- err
			break
		}
		mine := units / writers
		if w < units%writers {
			mine++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- ch.write(ctx, e.client, mine, per)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// write makes units writes of per puts each: a single put (per 1) or a
// transaction of per puts to distinct records.
func (c *changer) write(ctx context.Context, kv clientv3.KV, units, per int) error {
	for range units {
		var ops []clientv3.Op
		picks := []int{c.rng.IntN(len(c.nodes))}
		if per > 1 {
			picks = c.rng.Perm(len(c.nodes))[:per]
		}
		for _, i := range picks {
			op, err := c.change(i)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		var err error
		if per == 1 {
			_, err = kv.Do(ctx, ops[0])
		} else {
			_, err = kv.Txn(ctx).Then(ops...).Commit()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// profileEnv is the environment of a nodewatch run of a live row, or of
// row 2's serve: with -profile, a CPU profile into DIR/<row>-<name>.pprof
// and an allocation profile (what was live at the end, too) into
// DIR/<row>-<name>-mem.pprof (the last pair's run's).
func (c config) profileEnv(row int, name string) []string {
	if c.profile == "" {
		return nil
	}
	at := func(suffix string) string {
		return filepath.Join(c.profile, fmt.Sprintf("%d-%s%s.pprof", row, name, suffix))
	}
	return []string{"NODEWATCH_CPUPROFILE=" + at(""), "NODEWATCH_MEMPROFILE=" + at("-mem")}
}
