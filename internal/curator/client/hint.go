package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/near"
)

// maxNear is how many ids a hint names.
const maxNear = 3

// Hint says, for a client of one node (NodeID) that is not there, which
// ids of the nodes that are come closest to NodeID (near.IDs): "node
// metropolis-a1b3 does not exist; the closest id: metropolis-a1b2", one
// line. It lists every node once (IDs); it has nothing to say for a
// client of every node, nor for a node that does exist. It is watch.Hinter: the run asks it when the
// view is empty after the initial state.
func (c *Client) Hint(ctx context.Context) ([]string, error) {
	if c.NodeID == "" {
		return nil, nil
	}
	ids, err := c.IDs(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if id == c.NodeID {
			return nil, nil // it came meanwhile
		}
	}
	return []string{c.hint(ids)}, nil
}

// hint is Hint's line, for a node not among ids.
func (c *Client) hint(ids []string) string {
	switch closest := near.IDs(c.NodeID, ids, maxNear); {
	case len(ids) == 0:
		return fmt.Sprintf("node %s does not exist: the cluster has no nodes", c.NodeID)
	case len(closest) == 1:
		return fmt.Sprintf("node %s does not exist; the closest id: %s", c.NodeID, closest[0])
	case len(closest) > 1:
		return fmt.Sprintf("node %s does not exist; the closest ids: %s", c.NodeID, strings.Join(closest, ", "))
	case len(ids) == 1:
		return fmt.Sprintf("node %s does not exist; the cluster's one node is %s", c.NodeID, ids[0])
	}
	return fmt.Sprintf("node %s does not exist, nor any with an id like it (of %d nodes)", c.NodeID, len(ids))
}

// IDs lists the ids of every node once: the backlog of a Watch of every
// node, as Run would hand it over first, without health. It blocks until
// the backlog is in, and fails as Run does (ErrUnavailable, a fatal
// status) or when ctx ends.
func (c *Client) IDs(ctx context.Context) ([]string, error) {
	all := *c
	all.NodeID, all.HealthInterval, all.Listed = "", 0, nil
	all.Logf, all.Debugf = nil, nil // the run's own client tells of losses
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &firstFull{cancel: cancel}
	err := all.Run(ctx, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return s.ids, nil
	}
	if err == nil {
		err = errors.New("curator client: the listing ended without its backlog")
	}
	return nil, err
}

// firstFull is the Sink of IDs: it keeps the ids of the first full
// batch, and ends the run.
type firstFull struct {
	cancel context.CancelFunc
	mu     sync.Mutex // guards done and ids
	done   bool
	ids    []string
}

func (s *firstFull) Put(b flow.Batch) {
	if !b.Full() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	for _, ch := range b.Changes {
		if !ch.Deleted {
			s.ids = append(s.ids, ch.ID)
		}
	}
	s.done = true
	s.cancel()
}
