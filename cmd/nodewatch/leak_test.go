package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/nodewatch/nodewatch/internal/testkit/faults"
)

// TestMain fails the package's tests if a goroutine they started is
// still running when they are done. Ignored: the HTTP keep-alive
// connections embedded etcd servers open to their own HTTP endpoints
// (version and health checks) and leave to idle out after Close.
//
// Started by the fault suite as an etcd member, the test binary is one
// instead (faults.MemberMain), until killed or SIGTERM.
func TestMain(m *testing.M) {
	faults.MemberMain()
	code := m.Run()
	// The binary the end-to-end tests built goes with the run: make test
	// leaves the temporary directory as it found it.
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
			goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
