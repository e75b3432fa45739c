package devfleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EtcdCommand is the program that runs the fleet's etcd: nodewatch-etcd
// (cmd/nodewatch-etcd), which embeds it. Start looks for it beside the
// running executable first, then in PATH.
const EtcdCommand = "nodewatch-etcd"

// ErrNoEtcd is the error of a Start that found no EtcdCommand.
var ErrNoEtcd = errors.New(EtcdCommand + " not found beside nodewatch or in PATH: serve --dev runs its etcd with it (make build builds both; go install github.com/nodewatch/nodewatch/cmd/...)")

// etcdProc is a running nodewatch-etcd.
type etcdProc struct {
	cmd      *exec.Cmd
	stdin    io.Closer // closing it stops etcd
	endpoint string
	exited   chan struct{} // closed once the process has exited and been reaped
	err      error         // how it exited, once exited is closed
}

// findEtcd returns the path of EtcdCommand: an executable file.
func findEtcd() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), EtcdCommand)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(EtcdCommand); err == nil {
		return p, nil
	}
	return "", ErrNoEtcd
}

// startEtcd starts nodewatch-etcd on dir (removed when it exits, with
// temporary) and waits until it says where it serves: up to startWait,
// while ctx lasts and while it runs. Its stderr is nodewatch's.
func startEtcd(ctx context.Context, dir string, temporary bool) (*etcdProc, error) {
	path, err := findEtcd()
	if err != nil {
		return nil, err
	}
	args := []string{"--data-dir", dir}
	if temporary {
		args = append(args, "--remove-data-dir")
	}
	cmd := exec.Command(path, args...)
	cmd.Stderr = os.Stderr
	// Its own process group: a ^C at the terminal stops serve, which
	// stops its simulator first and then etcd, not etcd under it.
	ownGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of its own, not StdoutPipe: reading it does not race with
	// Wait, which runs from the start.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &etcdProc{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
	}()
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case p.endpoint = <-line:
	case <-p.exited:
	case <-ctx.Done():
	case <-timer.C:
	}
	if !strings.HasPrefix(p.endpoint, "http") {
		p.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s did not start etcd (%v; its errors are above)", path, p.exitErr())
	}
	return p, nil
}

// startWait is how long startEtcd waits for etcd to serve: embedetcd's
// own limit, and a little more.
const startWait = 70 * time.Second

// exitErr says how the process exited, or that it still runs.
func (p *etcdProc) exitErr() error {
	select {
	case <-p.exited:
		if p.err == nil {
			return errors.New("it exited")
		}
		return p.err
	default:
		return errors.New("it did not say where it serves")
	}
}

// close stops etcd: it closes its stdin and waits, and kills it if it
// has not exited within stopWait. It is called from one goroutine, once.
func (p *etcdProc) close() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(stopWait):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// stopWait is how long close waits for etcd to stop by itself.
const stopWait = 30 * time.Second
