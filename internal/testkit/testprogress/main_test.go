package main

import (
	"strings"
	"testing"
	"time"
)

// TestRun: a passing package gets one line and its output is not shown;
// a failing test's output is shown with its verdict, and so is a failed
// build; the run then exits 1. Lines that are not test2json pass through.
func TestRun(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p/ok"}`,
		`{"Action":"run","Package":"p/ok","Test":"TestA"}`,
		`{"Action":"output","Package":"p/ok","Test":"TestA","Output":"quiet\n"}`,
		`{"Action":"pass","Package":"p/ok","Test":"TestA"}`,
		`{"Action":"pass","Package":"p/ok","Elapsed":1.5}`,
		`{"Action":"start","Package":"p/bad"}`,
		`{"Action":"run","Package":"p/bad","Test":"TestB"}`,
		`{"Action":"output","Package":"p/bad","Test":"TestB","Output":"    b_test.go:9: got 1, want 2\n"}`,
		`{"Action":"fail","Package":"p/bad","Test":"TestB"}`,
		`{"Action":"fail","Package":"p/bad","Elapsed":2}`,
		`{"ImportPath":"p/broken","Action":"build-output","Output":"p/broken/x.go:1: syntax error\n"}`,
		`{"ImportPath":"p/broken","Action":"build-fail"}`,
		`vet: something the toolchain said`,
	}, "\n")
	var out strings.Builder
	code := run(strings.NewReader(in), &out, time.Hour)
	got := out.String()
	for _, want := range []string{
		"ok    p/ok (1.5s)\n",
		"      b_test.go:9: got 1, want 2\nFAIL  p/bad TestB\n",
		"FAIL  p/bad (2.0s)\n",
		"      p/broken/x.go:1: syntax error\nFAIL build p/broken\n",
		"vet: something the toolchain said\n",
		"FAIL  3 failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output is shown:\n%s", got)
	}
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	out.Reset()
	if code := run(strings.NewReader(`{"Action":"pass","Package":"p/ok","Elapsed":1}`), &out, time.Hour); code != 0 || !strings.Contains(out.String(), "PASS  all packages") {
		t.Errorf("all passed: exit %d, output %q", code, out.String())
	}
}
