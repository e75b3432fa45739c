//go:build linux

package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit/faults"
)

// The fault suite (package faults): nodewatch processes follow a 3-member
// etcd cluster and two `serve` replicas while a random workload writes
// and faults are injected at random; each printed stream, replayed, must
// obey its rules throughout and equal the source in the end.

// TestFaultsSmoke is one short run with a few faults, part of make test.
// It runs no etcdctl beside nodewatch: waiting for etcdctl to find a
// silent connection (16s) would double the run's length.
func TestFaultsSmoke(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	rep := faultRun(t, seed, 3, "")
	t.Logf("%s", summary([]*faults.Report{rep}, rep.Duration, "the smoke run runs none"))
}

// TestFaults (make faults; skipped unless NODEWATCH_FAULTS is set) runs
// NODEWATCH_FAULTS_RUNS runs (default 20) of one fault of each kind each
// (in a random order), seeds from
// NODEWATCH_FAULTS_SEED on (default: from the clock), and prints a summary.
func TestFaults(t *testing.T) {
	if os.Getenv("NODEWATCH_FAULTS") == "" {
		t.Skip("set NODEWATCH_FAULTS=1 (or run make faults) for the fault suite")
	}
	runs, seed := 20, uint64(time.Now().UnixNano()%1_000_000)
	if v := os.Getenv("NODEWATCH_FAULTS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("NODEWATCH_FAULTS_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	if v := os.Getenv("NODEWATCH_FAULTS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("NODEWATCH_FAULTS_SEED=%q: want a number", v)
		}
		seed = n
	}
	start := time.Now()
	ctl, why := etcdctl()
	if ctl == "" {
		t.Logf("etcdctl is not run beside nodewatch: %s", why)
	}
	var reps []*faults.Report
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			reps = append(reps, faultRun(t, s, len(faults.Kinds()), ctl))
		})
	}
	t.Logf("%s", summary(reps, time.Since(start), why))
}

// faultRun runs one run of n faults, with the etcdctl binary ctl ("" for
// none) beside nodewatch, and fails t, naming the seed and the command that
// runs it again, if it found anything.
func faultRun(t *testing.T, seed uint64, n int, ctl string) *faults.Report {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := faults.Run(t, faults.Config{
		Seed:     seed,
		Bin:      binary(t),
		Exe:      exe,
		Env:      []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()},
		Faults:   n,
		Rate:     60,
		Converge: 90 * time.Second,
		Etcdctl:  ctl,
	})
	if rep.Failed() {
		var b strings.Builder
		fmt.Fprintf(&b, "seed %d failed; run it again with: make faults FAULTSEED=%d FAULTRUNS=1\n", seed, seed)
		for _, v := range rep.Violations {
			fmt.Fprintf(&b, "violation: %s\n", v)
		}
		for _, d := range rep.Divergences {
			fmt.Fprintf(&b, "divergence: %s\n", d)
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(&b, "problem: %s\n", p)
		}
		t.Error(b.String())
	}
	return rep
}

// summary describes reports: runs, faults by kind, events checked,
// violations, divergences, problems, wall time, times to recover, and
// why etcdctl was not run beside nodewatch (noEtcdctl; "" if it was).
func summary(reps []*faults.Report, wall time.Duration, noEtcdctl string) string {
	var b strings.Builder
	byKind := map[faults.Kind]int{}
	var events, violations, divergences, problems, failed int
	var writes int64
	var failedSeeds []string
	for _, r := range reps {
		for k, n := range r.Faults {
			byKind[k] += n
		}
		events += r.Events
		writes += r.Writes
		violations += len(r.Violations)
		divergences += len(r.Divergences)
		problems += len(r.Problems)
		if r.Failed() {
			failed++
			failedSeeds = append(failedSeeds, strconv.FormatUint(r.Seed, 10))
		}
	}
	total := 0
	for _, n := range byKind {
		total += n
	}
	fmt.Fprintf(&b, "fault suite: %d runs (%d failed), %d faults injected, %d writes, %d events checked, %d invariant violations, %d divergences, %d problems, %v\n",
		len(reps), failed, total, writes, events, violations, divergences, problems, wall.Round(time.Second))
	for _, k := range faults.Kinds() {
		fmt.Fprintf(&b, "  %-26s %d\n", k, byKind[k])
	}
	b.WriteString(recoveries(reps))
	if noEtcdctl != "" {
		fmt.Fprintf(&b, "etcdctl was not run beside nodewatch: %s\n", noEtcdctl)
	}
	if len(failedSeeds) > 0 {
		slices.Sort(failedSeeds)
		fmt.Fprintf(&b, "failed seeds: %s (make faults FAULTSEED=S FAULTRUNS=1)\n", strings.Join(failedSeeds, " "))
	}
	return b.String()
}

// recoveries tabulates the times to recover by fault kind and stream:
// median and worst of those that recovered, and how many did not.
func recoveries(reps []*faults.Report) string {
	type cell struct {
		took   []time.Duration
		held   []time.Duration
		failed []string
	}
	cells := map[faults.Kind]map[string]*cell{}
	for _, r := range reps {
		for _, rec := range r.Recoveries {
			if cells[rec.Kind] == nil {
				cells[rec.Kind] = map[string]*cell{}
			}
			c := cells[rec.Kind][rec.Stream]
			if c == nil {
				c = &cell{}
				cells[rec.Kind][rec.Stream] = c
			}
			c.held = append(c.held, rec.Held)
			if rec.Failed != "" {
				c.failed = append(c.failed, rec.Failed)
			} else {
				c.took = append(c.took, rec.Took)
			}
		}
	}
	if len(cells) == 0 {
		return ""
	}
	streams := []string{faults.StreamKey, faults.StreamNodes, faults.StreamEtcdctl}
	var b strings.Builder
	fmt.Fprintf(&b, "time to recover, from the fault to the first line showing a write acknowledged after it: median / worst (samples; not recovered)\n")
	fmt.Fprintf(&b, "  %-26s %-8s", "fault", "held")
	for _, s := range streams {
		fmt.Fprintf(&b, " %-30s", s)
	}
	b.WriteString("\n")
	round := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	var notes []string
	for _, k := range faults.Kinds() {
		row := cells[k]
		if row == nil {
			continue
		}
		var held []time.Duration
		for _, c := range row {
			held = c.held
		}
		fmt.Fprintf(&b, "  %-26s %-8s", k, round(median(held)))
		for _, s := range streams {
			c := row[s]
			text := "-"
			switch {
			case c == nil:
			case len(c.took) == 0:
				text = fmt.Sprintf("none (0; %d not)", len(c.failed))
			default:
				text = fmt.Sprintf("%s / %s (%d", round(median(c.took)), round(slices.Max(c.took)), len(c.took))
				if len(c.failed) > 0 {
					text += fmt.Sprintf("; %d not", len(c.failed))
				}
				text += ")"
			}
			if c != nil && len(c.failed) > 0 {
				notes = append(notes, fmt.Sprintf("%s %s: %s", k, s, c.failed[0]))
			}
			fmt.Fprintf(&b, " %-30s", text)
		}
		b.WriteString("\n")
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "  not recovered, e.g.: %s\n", n)
	}
	return b.String()
}

// median returns the median of ds (the lower middle one), 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[(len(ds)-1)/2]
}

// memberMain makes the test binary an etcd member when the fault suite
// started it as one (faults.MemberMain).
func memberMain() { faults.MemberMain() }
