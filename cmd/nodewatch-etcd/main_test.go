package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestServesUntilStdinEnds: it prints a client URL where etcd serves, and
// stops etcd and exits 0 once its stdin ends.
func TestServesUntilStdinEnds(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--data-dir", t.TempDir()}, stdinR, stdoutW, &stderr)
		stdoutW.Close()
	}()
	lines := bufio.NewScanner(stdoutR)
	if !lines.Scan() {
		t.Fatalf("no endpoint; exit %d, stderr %q", <-code, stderr.String())
	}
	endpoint := lines.Text()
	go io.Copy(io.Discard, stdoutR)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := c.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put to %s: %v", endpoint, err)
	}
	if resp, err := c.Get(ctx, "/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get from %s: %v %v", endpoint, resp, err)
	}
	select {
	case got := <-code:
		t.Fatalf("exited %d while its stdin is open", got)
	default:
	}
	stdinW.Close()
	if got := <-code; got != 0 {
		t.Fatalf("exit %d after stdin ended; stderr %q", got, stderr.String())
	}
}

// TestUsage: without --data-dir, or with an argument, it exits 2 and says
// how it is run.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--data-dir", t.TempDir(), "extra"}, {"--nope"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 2 || stdout.Len() > 0 || !strings.Contains(stderr.String(), "data-dir") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}
