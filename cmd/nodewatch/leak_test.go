//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is
// still running when they are done. Ignored: the HTTP keep-alive
// connections embedded etcd servers open to their own HTTP endpoints
// (version and health checks) and leave to idle out after Close.
//
// Started by the fault suite as an etcd member, the test binary is one
// instead (memberMain), until killed or SIGTERM.
//
// serve --dev run in-process (TestCLI) finds nodewatch-etcd in PATH: it
// is built first, into a directory put in front of PATH.
func TestMain(m *testing.M) {
	memberMain()
	etcdDir, err := os.MkdirTemp("", "nodewatch-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	etcdPath = filepath.Join(etcdDir, "nodewatch-etcd")
	if out, err := exec.Command("go", "build", "-o", etcdPath, "../nodewatch-etcd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build nodewatch-etcd: %v\n%s", err, out)
		os.Exit(1)
	}
	os.Setenv("PATH", etcdDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	code := m.Run()
	// The binaries built for the tests go with the run: make test leaves
	// the temporary directory as it found it.
	os.RemoveAll(etcdDir)
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
