// Command demo shows `nodewatch key --prefix` on an embedded etcd: it
// starts etcd in a temporary directory, runs the nodewatch binary given as
// its argument against it, and writes, changes and deletes a few keys.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: demo PATH-TO-NODEWATCH")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "nodewatch-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedetcd.Start(embedetcd.Config{Dir: dir})
	if err != nil {
		return err
	}
	defer srv.Close()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	c.Put(ctx, "/demo/node-a", `{"state":"NEW"}`)
	c.Put(ctx, "/demo/node-b", `{"state":"UP","address":"10.0.0.2"}`)

	fmt.Fprintf(os.Stderr, "demo: etcd at %s; running: nodewatch key --prefix /demo/ --etcd %s\n", srv.Endpoint, srv.Endpoint)
	cmd := exec.CommandContext(ctx, os.Args[1], "key", "--prefix", "/demo/", "--etcd", srv.Endpoint, "--timeout", "6s")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	steps := []func(){
		func() { c.Put(ctx, "/demo/node-a", `{"state":"UP","address":"10.0.0.1"}`) },
		func() { c.Put(ctx, "/demo/node-a", `{"state":"UP","address":"10.0.0.1"}`) }, // identical: prints nothing
		func() { c.Put(ctx, "/demo/node-c", "plain text is fine too") },
		func() { c.Txn(ctx).Then(clientv3.OpDelete("/demo/node-b"), clientv3.OpPut("/demo/node-d", `{"state":"NEW"}`)).Commit() },
	}
	for _, step := range steps {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			step()
		}
	}
	return cmd.Wait()
}
