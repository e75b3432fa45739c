package devfleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
}

// findEtcd returns the path of EtcdCommand.
func findEtcd() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), EtcdCommand)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(EtcdCommand); err == nil {
		return p, nil
	}
	return "", ErrNoEtcd
}

// startEtcd starts nodewatch-etcd on dir and waits, up to startWait,
// until it says where it serves. Its stderr is nodewatch's.
func startEtcd(dir string) (*etcdProc, error) {
	path, err := findEtcd()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--data-dir", dir)
	cmd.Stderr = os.Stderr
	// Its own process group: a ^C at the terminal stops serve, which
	// stops its simulator first and then etcd, not etcd under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &etcdProc{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
		io.Copy(io.Discard, stdout)
	}()
	select {
	case p.endpoint = <-line:
	case <-time.After(startWait):
	}
	if !strings.HasPrefix(p.endpoint, "http") {
		p.close()
		return nil, fmt.Errorf("%s did not start etcd (its errors are above)", path)
	}
	return p, nil
}

// startWait is how long startEtcd waits for etcd to serve: embedetcd's
// own limit, and a little more.
const startWait = 70 * time.Second

// close stops etcd: it closes its stdin and waits, and kills it if it
// has not exited within stopWait.
func (p *etcdProc) close() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopWait):
		p.cmd.Process.Kill()
		<-done
	}
}

// stopWait is how long close waits for etcd to stop by itself.
const stopWait = 30 * time.Second
