// Command nodewatch-etcd is the etcd of `nodewatch serve --dev`: a real,
// single-member etcd (go.etcd.io/etcd/server/v3/embed) on a free loopback
// port, with its data in --data-dir. nodewatch starts it as a child
// process and stops it, so that the etcd server is built into this
// binary, not into every nodewatch process (nodewatch key, nodes and
// serve without --dev start faster and take less memory without it).
//
// It prints etcd's client URL as its first line on stdout once etcd
// serves, and runs until its stdin ends (nodewatch closes it, or
// nodewatch is gone) or it is sent SIGINT or SIGTERM; then it stops etcd
// (and with --remove-data-dir removes its data, so that a serve killed
// outright leaves none behind) and exits 0. It exits 1 when etcd does not
// start, and 2 on bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodewatch-etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the directory that holds etcd's data (required; created if missing)")
	remove := fs.Bool("remove-data-dir", false, "remove --data-dir and what it holds on exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: nodewatch-etcd --data-dir DIR (nodewatch serve --dev runs it)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *remove {
		defer os.RemoveAll(*dir)
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "nodewatch-etcd: %v\n", err)
		return 1
	}
	srv, err := embedetcd.Start(embedetcd.Config{Dir: *dir})
	if err != nil {
		fmt.Fprintf(stderr, "nodewatch-etcd: %v\n", err)
		return 1
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(stdout, srv.Endpoint); err != nil {
		return 1
	}
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return 0
}
