// Command nodewatch follows cluster state and prints every change as
// newline-delimited JSON. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

func main() {
	// A closed stdout must be a write error (EPIPE) that nodewatch handles,
	// not a signal that kills it before it can flush and close connections.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	endProfiles := startProfiles()
	watchOnOneProc = os.Getenv("GOMAXPROCS") == ""
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, reloads: hangups}
	code := runEnv(ctx, e, os.Args[1:])
	stop()
	endProfiles()
	os.Exit(code)
}

// hangups delivers SIGHUP, which asks serve to read its certificate
// again (env.reloads).
func hangups() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// watchOnOneProc: the watching commands (key, nodes, node) run on one P
// (GOMAXPROCS=1) unless the GOMAXPROCS variable says otherwise. A watch is
// a pipeline of goroutines handing over one event at a time: on one P a
// hand-over is a run-queue push; on two it wakes a sleeping thread and an
// idle P spins looking for work. On a live stream that was a seventh of
// nodewatch's CPU; a large --once listing got faster too (BENCHMARKS.md).
// main sets it; in-process tests leave the test binary alone.
var watchOnOneProc bool

// startProfiles starts the profiles that NODEWATCH_CPUPROFILE and
// NODEWATCH_MEMPROFILE ask for (files written when the run ends; see
// BENCHMARKS.md) and returns what ends them.
func startProfiles() (end func()) {
	cpu, mem := os.Getenv("NODEWATCH_CPUPROFILE"), os.Getenv("NODEWATCH_MEMPROFILE")
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "nodewatch: NODEWATCH_CPUPROFILE: %v\n", err)
		}
		cpuFile = f
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if mem != "" {
			f, err := os.Create(mem)
			if err == nil {
				runtime.GC()
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "nodewatch: NODEWATCH_MEMPROFILE: %v\n", err)
			}
		}
	}
}
