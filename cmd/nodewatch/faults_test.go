package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/faults"
)

// The fault suite (package faults): nodewatch processes follow a 3-member
// etcd cluster and two `serve` replicas while a random workload writes
// and faults are injected at random; each printed stream, replayed, must
// obey its rules throughout and equal the source in the end.

// TestFaultsSmoke is one short run with a few faults, part of make test.
func TestFaultsSmoke(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	rep := faultRun(t, seed, 3)
	t.Logf("%s", summary([]*faults.Report{rep}, rep.Duration))
}

// TestFaults (make faults; skipped unless NODEWATCH_FAULTS is set) runs
// NODEWATCH_FAULTS_RUNS runs (default 20) of eight faults each, seeds from
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
	var reps []*faults.Report
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			reps = append(reps, faultRun(t, s, 8))
		})
	}
	t.Logf("%s", summary(reps, time.Since(start)))
}

// faultRun runs one run of n faults and fails t, naming the seed and the
// command that runs it again, if it found anything.
func faultRun(t *testing.T, seed uint64, n int) *faults.Report {
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
// violations, divergences, problems, wall time.
func summary(reps []*faults.Report, wall time.Duration) string {
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
	if len(failedSeeds) > 0 {
		slices.Sort(failedSeeds)
		fmt.Fprintf(&b, "failed seeds: %s (make faults FAULTSEED=S FAULTRUNS=1)\n", strings.Join(failedSeeds, " "))
	}
	return b.String()
}
