// Package profile writes the CPU and allocation profiles that
// NODEWATCH_CPUPROFILE and NODEWATCH_MEMPROFILE ask for (pprof profiles,
// read with go tool pprof; make bench-compare's -profile sets both), so
// that a run of the real binary can be profiled as a user runs it.
package profile

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
)

// Start starts a CPU profile into the file cpu ("" for none) and returns
// what ends the profiles: it stops the CPU profile and writes the
// allocation profile into the file mem ("" for none). A file that cannot
// be written is reported on stderr and the run goes on.
func Start(cpu, mem string, stderr io.Writer) (end func()) {
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "nodewatch: NODEWATCH_CPUPROFILE: %v\n", err)
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
				fmt.Fprintf(stderr, "nodewatch: NODEWATCH_MEMPROFILE: %v\n", err)
			}
		}
	}
}
