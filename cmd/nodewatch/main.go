// Command nodewatch follows cluster state and prints every change as
// newline-delimited JSON. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/handler"
	"github.com/nodewatch/nodewatch/internal/profile"
)

func main() {
	// A closed stdout must be a write error (EPIPE) that nodewatch handles,
	// not a signal that kills it before it can flush and close connections.
	signal.Ignore(syscall.SIGPIPE)
	// The first SIGINT or SIGTERM ends the run (serve drains); its cause
	// names the signal, which a running --exec handler gets too. A
	// second one exits at once.
	ctx, stop := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		stop(handler.Signal{Signal: <-signals})
		sig := <-signals
		fmt.Fprintf(os.Stderr, "nodewatch: %v again: exiting at once\n", sig)
		os.Exit(exitInterrupted)
	}()
	endProfiles := profile.Start(os.Getenv("NODEWATCH_CPUPROFILE"), os.Getenv("NODEWATCH_MEMPROFILE"), os.Stderr)
	code := runEnv(ctx, &env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		reloads: hangups, oneProc: os.Getenv("GOMAXPROCS") == "" && fast.On(fast.OneProc),
	}, os.Args[1:])
	stop(nil)
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
