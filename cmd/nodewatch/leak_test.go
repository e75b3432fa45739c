package main

import (
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
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}
