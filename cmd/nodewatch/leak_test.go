package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/nodewatch/nodewatch/internal/testkit/faults"
)

// TestMain fails the package's tests if a goroutine they started is
// still running when they are done. Ignored: the HTTP keep-alive
// connections embedded etcd servers open to their own HTTP endpoints
// (version and health checks) and leave to idle out after Close.
//
// Started by the fault suite with faults.MemberEnv set, the test binary
// is an etcd member instead (package faults), until killed or SIGTERM.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(faults.MemberEnv); cfg != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := faults.RunMember(ctx, cfg, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(faults.MemberExitCode(err))
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}
