//go:build linux

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// MemberEnv is the environment variable that makes a test binary an etcd
// member: its TestMain, calling MemberMain first, runs the member its value
// describes instead of the tests.
const MemberEnv = "NODEWATCH_FAULTS_MEMBER"

// memberReady is the line a member prints on stdout once it serves.
const memberReady = "ready"

// exitAddrInUse is a member's exit code when its addresses are taken.
const exitAddrInUse = 98

// MemberMain makes the running test binary an etcd member when a Cluster
// started it as one (MemberEnv is set): it runs the member until SIGTERM
// or SIGINT, then exits. Otherwise it returns at once. The TestMain of a
// package whose tests start a Cluster (or a fault run) calls it first.
func MemberMain() {
	cfg := os.Getenv(MemberEnv)
	if cfg == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := runMember(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(memberExitCode(err))
}

// runMember runs the etcd member that cfg (an embedetcd.Config as JSON)
// describes, prints "ready" on stdout once it serves clients, and blocks
// until ctx ends (then closes it cleanly) or the process is killed.
func runMember(ctx context.Context, cfg string, stdout io.Writer) error {
	var c embedetcd.Config
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		return fmt.Errorf("member config: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	s, err := embedetcd.Start(c)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintln(stdout, memberReady)
	<-ctx.Done()
	return nil
}

// memberExitCode is the exit code for a member whose runMember returned
// err: 0 for nil, a code of its own when the addresses were taken (Cluster
// then starts it again), 1 otherwise.
func memberExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, syscall.EADDRINUSE):
		return exitAddrInUse
	}
	return 1
}

// Cluster is a 3-member etcd cluster whose members are processes (the
// running test binary, started again with MemberEnv set), so that a fault
// is what it would be in production: SIGKILL with no goodbye, SIGSTOP with
// sockets open. Members listen on a loopback address of the cluster's own
// (127.x.y.z), so that their ports stay free for restarts. Its methods are
// called by one goroutine, except Endpoints and Client, which are safe
// anywhere.
type Cluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string
	// Host is the cluster's loopback address, for other listeners of the
	// run (serve).
	Host string

	exe     string
	dir     string
	configs []embedetcd.Config
	members []*member // nil while killed
	peers   *peerNet
	logf    func(format string, args ...any)
}

// member is a running member process.
type member struct {
	cmd       *exec.Cmd
	readyLine chan string   // the first line of its stdout ("" if none)
	done      chan struct{} // closed when cmd.Wait has returned
	paused    bool
}

// StartCluster starts a 3-member cluster, data under dir, members run by
// the executable exe (the test binary). The caller must Close it.
//
// A port picked for a member was free a moment before the member binds
// it, and the peer forwarders, started in between, take free ports of
// the same host: when a member finds its address taken, the cluster is
// started again on new ports (a few times), in a new directory.
func StartCluster(exe, dir, host string, logf func(string, ...any)) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := startCluster(exe, fmt.Sprintf("%s/%d", dir, attempt), host, logf)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			return c, err
		}
		logf("cluster: %v; starting it again on other ports", err)
	}
}

func startCluster(exe, dir, host string, logf func(string, ...any)) (*Cluster, error) {
	c := &Cluster{exe: exe, dir: dir, Host: host, logf: logf, members: make([]*member, 3)}
	var peerAddrs []string
	for i := range 3 {
		client, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			return nil, err
		}
		peer, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("m%d", i)
		c.configs = append(c.configs, embedetcd.Config{
			Dir: fmt.Sprintf("%s/%s", dir, name), ClientAddr: client, PeerAddr: peer, Name: name,
		})
		c.Endpoints = append(c.Endpoints, "http://"+client)
		peerAddrs = append(peerAddrs, peer)
	}
	// Peer traffic goes through a forwarder per link, so that Isolate
	// can cut a member off from its peers.
	peers, err := newPeerNet(host, peerAddrs)
	if err != nil {
		return nil, err
	}
	c.peers = peers
	var initial []string
	for i := range c.configs {
		c.configs[i].AdvertisePeerAddr = peers.advertise(i)
		initial = append(initial, c.configs[i].Name+"=http://"+peers.advertise(i))
	}
	// The members of a new cluster wait for each other: start all, then
	// wait for each.
	for i := range c.configs {
		c.configs[i].InitialCluster = strings.Join(initial, ",")
		m, err := c.spawn(i)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.members[i] = m
	}
	for i, m := range c.members {
		if err := c.ready(i, m); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// spawn starts member i's process; ready waits until it serves.
func (c *Cluster) spawn(i int) (*member, error) {
	cfg, err := json.Marshal(c.configs[i])
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.exe)
	cmd.Env = append(os.Environ(), MemberEnv+"="+string(cfg))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = newTail()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start member %d: %w", i, err)
	}
	m := &member{cmd: cmd, readyLine: make(chan string, 1), done: make(chan struct{})}
	c.peers.setPid(i, cmd.Process.Pid)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		m.readyLine <- strings.TrimSpace(l)
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(m.done)
	}()
	return m, nil
}

// ready waits until member i prints that it serves, or ends.
func (c *Cluster) ready(i int, m *member) error {
	select {
	case l := <-m.readyLine:
		if l == memberReady {
			return nil
		}
		<-m.done
		if m.cmd.ProcessState.ExitCode() == exitAddrInUse {
			return fmt.Errorf("member %d: %w", i, syscall.EADDRINUSE)
		}
		return fmt.Errorf("member %d ended: %s", i, m.cmd.Stderr.(*testkit.Buffer).String())
	case <-time.After(2 * time.Minute):
		m.cmd.Process.Kill()
		<-m.done
		return fmt.Errorf("member %d: not ready after 2 minutes: %s", i, m.cmd.Stderr.(*testkit.Buffer).String())
	}
}

// Running reports whether member i runs (it may be paused).
func (c *Cluster) Running(i int) bool { return c.members[i] != nil }

// Kill stops member i with SIGKILL and waits until it is gone (a no-op if
// it is not running).
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	if m == nil {
		return
	}
	c.members[i] = nil
	m.cmd.Process.Kill()
	<-m.done
	c.peers.setPid(i, 0)
}

// Restart starts member i again on its data dir and addresses; the others
// must have a quorum for it to become ready. Addresses still in use (the
// killed process's sockets closing) are tried again for up to a minute.
func (c *Cluster) Restart(i int) error {
	if c.members[i] != nil {
		return nil
	}
	return testkit.Poll(context.Background(), time.Minute, func() (bool, error) {
		m, err := c.spawn(i)
		if err != nil {
			return true, err
		}
		err = c.ready(i, m)
		if err == nil {
			c.members[i] = m
			return true, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return true, err
		}
		c.logf("member %d: addresses in use, starting it again", i)
		return false, err
	})
}

// Pause stops member i with SIGSTOP: its sockets stay open, it answers
// nothing. Resume continues it.
func (c *Cluster) Pause(i int) {
	if m := c.members[i]; m != nil && !m.paused {
		m.cmd.Process.Signal(syscall.SIGSTOP)
		m.paused = true
	}
}

// Resume continues member i after Pause.
func (c *Cluster) Resume(i int) {
	if m := c.members[i]; m != nil && m.paused {
		m.cmd.Process.Signal(syscall.SIGCONT)
		m.paused = false
	}
}

// Isolate cuts member i off from its peers: every raft connection to or
// from it goes silent, and so does every new one, until Reconnect. Its
// clients still reach it.
func (c *Cluster) Isolate(i int) { c.peers.isolate(i) }

// Reconnect undoes Isolate: new peer connections are forwarded again and
// the silent ones are closed, so the members dial again.
func (c *Cluster) Reconnect() { c.peers.heal() }

// Paused reports whether member i is stopped with Pause.
func (c *Cluster) Paused(i int) bool { return c.members[i] != nil && c.members[i].paused }

// Heal reconnects every member to its peers, resumes every paused member
// and restarts every killed one.
func (c *Cluster) Heal() error {
	c.Reconnect()
	for i := range c.members {
		c.Resume(i)
	}
	for i := range c.members {
		if err := c.Restart(i); err != nil {
			return err
		}
	}
	return nil
}

// Leader returns the index of the member that is the leader, asking the
// running members' maintenance Status until one names itself, for up to
// a minute.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	leader := -1
	err := testkit.Poll(ctx, time.Minute, func() (bool, error) {
		for i, ep := range c.Endpoints {
			if m := c.members[i]; m != nil && !m.paused && c.isLeader(ctx, ep) {
				leader = i
				return true, nil
			}
		}
		return false, errors.New("no member says it leads")
	})
	return leader, err
}

func (c *Cluster) isLeader(ctx context.Context, ep string) bool {
	cl, err := c.Client(ep)
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cl.Status(ctx, ep)
	return err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId
}

// Client returns a client of the given endpoints (all members when none);
// the caller must Close it.
func (c *Cluster) Client(endpoints ...string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		// A paused member keeps its connections open and answers nothing:
		// keep-alives (no more often than etcd's 5s minimum) take it out
		// of the client's round robin.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
}

// Close kills every member and stops the peer forwarders.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Resume(i)
		c.Kill(i)
	}
	c.peers.close()
}

// MemberStderr returns the end of member i's stderr (etcd logs to a file
// in its data dir; this holds what went wrong starting it).
func (c *Cluster) MemberStderr(i int) string {
	if m := c.members[i]; m != nil {
		return m.cmd.Stderr.(*testkit.Buffer).String()
	}
	return ""
}

// newTail returns a buffer for a process's stderr that keeps its last
// 16 KiB.
func newTail() *testkit.Buffer { return &testkit.Buffer{Max: 16 << 10} }

// HasLeader reports whether member i answers its maintenance Status and
// knows a leader.
func (c *Cluster) HasLeader(ctx context.Context, i int) bool {
	cl, err := c.Client(c.Endpoints[i])
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cl.Status(ctx, c.Endpoints[i])
	return err == nil && st.Leader != 0
}
