// Command testprogress reads `go test -json` on stdin and says how a long
// test run goes, for make test: a line per package as it ends, every
// 30 seconds the packages and tests still running, and the whole output
// of each test that failed (and of a package that failed to build or
// failed outside its tests). It exits 1 when anything failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout, 30*time.Second))
}

// run reads events from r until it ends, writing to w, and returns the
// exit code.
func run(r io.Reader, w io.Writer, every time.Duration) int {
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
	}()
	p := &progress{w: w, start: time.Now(), output: map[string][]string{}, running: map[string]map[string]bool{}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return p.end()
			}
			var e event
			if json.Unmarshal(line, &e) != nil || e.Action == "" {
				fmt.Fprintf(w, "%s\n", line) // not test2json: go vet's or the toolchain's own words
				continue
			}
			p.handle(e)
		case <-tick.C:
			p.report()
		}
	}
}

type progress struct {
	w       io.Writer
	start   time.Time
	output  map[string][]string        // package or package+" "+test → its output so far
	running map[string]map[string]bool // package → tests running (the package itself: "")
	failed  []string
}

func (p *progress) handle(e event) {
	key := e.Package
	if e.Test != "" {
		key += " " + e.Test
	}
	switch e.Action {
	case "build-output":
		p.output["build "+e.ImportPath] = append(p.output["build "+e.ImportPath], e.Output)
	case "build-fail":
		p.fail("build "+e.ImportPath, "FAIL build "+e.ImportPath)
	case "start":
		p.running[e.Package] = map[string]bool{}
	case "run":
		if p.running[e.Package] != nil {
			p.running[e.Package][e.Test] = true
		}
	case "output":
		p.output[key] = append(p.output[key], e.Output)
	case "pass", "skip":
		delete(p.output, key)
		if e.Test == "" {
			if e.Action == "pass" {
				fmt.Fprintf(p.w, "ok    %s (%.1fs)\n", e.Package, e.Elapsed)
			}
			delete(p.running, e.Package)
		} else if p.running[e.Package] != nil {
			delete(p.running[e.Package], e.Test)
		}
	case "fail":
		if e.Test != "" {
			if p.running[e.Package] != nil {
				delete(p.running[e.Package], e.Test)
			}
			p.fail(key, "FAIL  "+key)
			return
		}
		delete(p.running, e.Package)
		// Output of the package outside its tests (a panic, TestMain, a
		// goroutine leak check): shown with the verdict.
		p.fail(key, fmt.Sprintf("FAIL  %s (%.1fs)", e.Package, e.Elapsed))
	}
}

// fail prints what key printed, then the verdict line, and counts it.
func (p *progress) fail(key, verdict string) {
	for _, o := range p.output[key] {
		fmt.Fprint(p.w, "      "+o)
	}
	delete(p.output, key)
	fmt.Fprintln(p.w, verdict)
	p.failed = append(p.failed, strings.TrimSpace(strings.TrimPrefix(verdict, "FAIL")))
}

// report says what is still running: each package, sorted, with up to
// three of its top-level tests.
func (p *progress) report() {
	pkgs := make([]string, 0, len(p.running))
	for pkg := range p.running {
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) == 0 {
		return
	}
	slices.Sort(pkgs)
	var parts []string
	for _, pkg := range pkgs {
		tests := make([]string, 0, len(p.running[pkg]))
		for t := range p.running[pkg] {
			if !strings.Contains(t, "/") {
				tests = append(tests, t)
			}
		}
		slices.Sort(tests)
		if len(tests) > 3 {
			tests = append(tests[:3], fmt.Sprintf("%d more", len(tests)-3))
		}
		part := strings.TrimPrefix(pkg, "github.com/nodewatch/nodewatch/")
		if len(tests) > 0 {
			part += " (" + strings.Join(tests, ", ") + ")"
		}
		parts = append(parts, part)
	}
	fmt.Fprintf(p.w, "..    %s in: still running %s\n", time.Since(p.start).Round(time.Second), strings.Join(parts, "; "))
}

func (p *progress) end() int {
	if len(p.failed) > 0 {
		fmt.Fprintf(p.w, "FAIL  %d failed after %s: %s\n", len(p.failed), time.Since(p.start).Round(time.Second), strings.Join(p.failed, "; "))
		return 1
	}
	fmt.Fprintf(p.w, "PASS  all packages in %s\n", time.Since(p.start).Round(time.Second))
	return 0
}
