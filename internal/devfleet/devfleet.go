// Package devfleet is what `nodewatch serve --dev` serves: an embedded
// etcd on loopback, run by nodewatch-etcd as a child process (etcd.go),
// with a simulated fleet of node records changing in it, and their nodes'
// heartbeats (health.go), so that everything runs on one machine with
// nothing else installed.
package devfleet

import (
	"context"
	"fmt"
	"os"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/sim"
)

// Config configures a Fleet.
type Config struct {
	// Dir keeps etcd's data; "" means a temporary directory, removed by
	// Close.
	Dir string
	// Nodes is the fleet size; Rate the simulated changes per second (0:
	// as fast as etcd takes them); Seed makes the changes reproducible.
	Nodes int
	Rate  float64
	Seed  int64
	// Prefix is where node records live.
	Prefix string
	// Churn: nodes join, are decommissioned and leave (--dev-churn);
	// otherwise the fleet stays at Nodes, all UP (sim.Config.Steady).
	Churn bool
	// Logf reports a simulator that stopped. Nil discards.
	Logf func(format string, args ...any)
}

// Fleet is a running etcd (nodewatch-etcd) with a simulator writing into
// it.
type Fleet struct {
	// Endpoint is etcd's client URL.
	Endpoint string

	etcd   *etcdProc
	client *clientv3.Client
	tmp    string // removed by Close; "" if Dir was given
	cancel context.CancelFunc
	wg     sync.WaitGroup // the simulator
}

// Start starts etcd, writes the fleet's records, and starts the
// simulator, which runs until Close. The caller must Close the Fleet.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	f := &Fleet{}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "nodewatch-dev-")
		if err != nil {
			return nil, err
		}
		dir, f.tmp = tmp, tmp
	}
	srv, err := startEtcd(ctx, dir, f.tmp != "")
	if err != nil {
		f.Close()
		return nil, err
	}
	f.etcd, f.Endpoint = srv, srv.endpoint
	if f.client, err = etcdkv.Connect(ctx, etcdkv.Config{Endpoints: []string{srv.endpoint}}, cfg.Prefix, true); err != nil {
		f.Close()
		return nil, err
	}
	s := sim.New(sim.Config{Nodes: cfg.Nodes, Seed: cfg.Seed, Prefix: cfg.Prefix, Steady: !cfg.Churn})
	if err := s.Populate(ctx, f.client); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the simulated fleet: %w", err)
	}
	hb := newHeartbeats(cfg.Prefix, cfg.Seed)
	hb.round(ctx, f.client) // the first heartbeats, before anyone asks
	simCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		if err := s.Run(simCtx, healthKV{f.client, hb}, cfg.Rate, 0); err != nil && simCtx.Err() == nil && cfg.Logf != nil {
			cfg.Logf("dev: simulator stopped: %v", err)
		}
	}()
	go func() {
		defer f.wg.Done()
		hb.run(simCtx, f.client)
	}()
	return f, nil
}

// Lost is closed when the fleet's etcd exits before Close stops it (it
// crashed, or was killed); LostErr then says how.
func (f *Fleet) Lost() <-chan struct{} { return f.etcd.exited }

// LostErr is how the fleet's etcd exited, once Lost is closed.
func (f *Fleet) LostErr() error {
	return fmt.Errorf("%s exited while serve ran: %v", EtcdCommand, f.etcd.exitErr())
}

// Close stops the simulator, then etcd, and removes a temporary data
// directory. It may be called on a Fleet that Start gave up on.
func (f *Fleet) Close() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	if f.client != nil {
		f.client.Close()
	}
	if f.etcd != nil {
		f.etcd.close()
	}
	if f.tmp != "" {
		os.RemoveAll(f.tmp)
	}
}
