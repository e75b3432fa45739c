package client

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// recvNodes follows a nodes_in_cluster stream until it breaks. The
// backlog's events are turned into changes on as many goroutines as there
// are Ps (converting a node to its JSON is most of a listing's CPU), and
// merged in the order they came once the backlog is complete.
func (r *clientRun) recvNodes(stream watchStream, est *atomic.Bool, heard *atomic.Int64) error {
	var backlog *backlogConverter // nil once handed over
	defer func() {
		if backlog != nil {
			backlog.wait()
		}
	}()
	backlog = newBacklogConverter(r, est)
	for {
		ev, err := stream.Recv()
		if err != nil {
			return recvError(err)
		}
		heard.Store(time.Now().UnixNano())
		if backlog == nil {
			if ev.progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
				r.c.Logf.Printf("curator sent a second PROGRESS_LAST_BACKLOGGED on one stream; taking its event as a change")
			}
			changes, err := r.changes(ev, "")
			if err != nil {
				return err
			}
			r.establish(est)
			if len(changes) > 0 {
				r.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes})
			}
			continue
		}
		if err := backlog.failed(); err != nil {
			return err
		}
		if len(ev.tombstones) > 0 {
			r.c.Logf.Printf("curator sent %d tombstones in the backlog; taking them as deletions", len(ev.tombstones))
		}
		backlog.add(ev)
		if ev.progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			latest, err := backlog.wait()
			backlog = nil
			if err != nil {
				return err
			}
			r.putFull(latest)
		}
	}
}

// recvNode follows a node_in_cluster stream until it breaks; see Client
// for how its first batch is decided.
func (r *clientRun) recvNode(stream watchStream, est *atomic.Bool, heard *atomic.Int64) error {
	var (
		// mu orders the settle timer's batch with the stream's, and
		// guards first and over.
		mu    sync.Mutex
		first = true  // no full batch was handed over on this stream
		over  = false // the stream ended: the timer must hand over nothing
	)
	settle := time.AfterFunc(r.c.settle(), func() {
		mu.Lock()
		defer mu.Unlock()
		if over || !first {
			return
		}
		first = false
		r.putFull(nil)
		r.establish(est)
	})
	defer func() {
		settle.Stop()
		mu.Lock()
		over = true
		mu.Unlock()
	}()
	for {
		ev, err := stream.Recv()
		if err != nil {
			return recvError(err)
		}
		heard.Store(time.Now().UnixNano())
		changes, err := r.changes(ev, r.c.NodeID)
		if err != nil {
			return err
		}
		mu.Lock()
		if first {
			first = false
			latest := make(map[string]flow.Change, len(changes))
			for _, c := range changes {
				latest[c.ID] = c
			}
			r.putFull(latest)
		} else if len(changes) > 0 {
			r.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes})
		}
		mu.Unlock()
		r.establish(est)
	}
}

func recvError(err error) error {
	if err == io.EOF {
		return errors.New("the server ended the stream")
	}
	return err
}

// putFull hands over the full state whose latest changes per id are
// latest (deletes among them are dropped).
func (r *clientRun) putFull(latest map[string]flow.Change) {
	b := flow.Batch{Cause: flow.CauseInitial, Synced: true, Changes: make([]flow.Change, 0, len(latest))}
	if r.handedFull.Swap(true) {
		b.Cause = flow.CauseResync
	}
	for _, c := range latest {
		if !c.Deleted {
			b.Changes = append(b.Changes, c)
		}
	}
	r.out.Put(b)
}

// changes turns ev into changes, nodes first, then tombstones; only those
// of node only, unless only is "". It fails if a node is not a Node
// message, which fails the event as a whole (as unmarshalling it did).
func (r *clientRun) changes(ev *wireEvent, only string) ([]flow.Change, error) {
	out := make([]flow.Change, 0, len(ev.nodes)+len(ev.tombstones))
	for _, node := range ev.nodes {
		id, obj, err := curator.ObjectOfWire(node)
		switch {
		case errors.Is(err, curator.ErrNodeWire):
			return nil, status.Error(codes.Internal, err.Error())
		case id == "":
			r.c.Logf.Printf("skipping a node without id")
			continue
		case only != "" && id != only:
			r.c.Logf.Printf("skipping node %q: watching %q", id, only)
			continue
		case err != nil:
			r.c.Logf.Printf("skipping node %q: %v", id, err)
			continue
		}
		out = append(out, flow.Change{ID: id, Object: obj})
	}
	for _, t := range ev.tombstones {
		if id := t.GetNodeId(); id != "" && (only == "" || id == only) {
			out = append(out, flow.Change{ID: id, Deleted: true})
		}
	}
	return out, nil
}
