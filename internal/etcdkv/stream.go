package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/etcdwire"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// watch follows changes after rev until the history is gone (returns nil)
// or ctx ends (returns ctx.Err()). Each range (one of Keys, see
// Followed) keeps the last revision it delivered, and a broken watch
// resumes every range from the lowest (see watchOnce), each skipping what
// it delivered already: one quiet range does not make another deliver
// again.
func (w *Watcher) watch(ctx context.Context, rev int64, out flow.Sink) error {
	ranges := w.ranges()
	revs := make([]int64, len(ranges))
	for i := range revs {
		revs[i] = rev
	}
	b := backoff.Backoff{Max: w.MaxBackoff}
	for {
		before := slices.Clone(revs)
		err := w.watchOnce(ctx, ranges, revs, out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			w.Logf.Printf("watch %s from rev %d: history compacted; listing again", w.name(), slices.Min(revs)+1)
			w.restarted(true)
			return nil
		}
		if refused(err) {
			return fmt.Errorf("watch %s: %w", w.name(), err)
		}
		if !slices.Equal(before, revs) {
			b.Reset() // progress was made: this is a fresh failure
		}
		var since time.Time // blind since the loss, or since a silent watch last heard
		if errors.Is(err, errSilent) {
			since = time.Unix(0, w.live.last.Load())
		}
		w.outage.Lost(w.peer, err, since)
		w.Debugf.Printf("watch %s: resuming at rev %d", w.name(), slices.Min(revs)+1)
		w.restarted(false)
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
}

// watchOnce runs one etcd watch per range on one stream, and delivers
// range i's changes after revs[i], keeping revs[i] at the last revision
// delivered for it; with several ranges, a merger puts their changes in
// revision order, one batch per revision. It returns the error that ended
// the stream.
//
// It speaks etcd's Watch RPC itself rather than through clientv3's
// Watcher, which hands every response through three goroutines of its
// own before the caller sees it; a live stream paid those wakeups on
// every event. The connection (and its credentials) is the client's.
// Errors are as clientv3 makes them: a compaction is
// rpctypes.ErrCompacted, a watch cancelled by the server carries its
// reason as codes.FailedPrecondition.
func (w *Watcher) watchOnce(ctx context.Context, ranges []keyRange, revs []int64, out flow.Sink) (err error) {
	wctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	defer cancel(nil)
	defer func() {
		// A stream torn down for silence ends with "context canceled";
		// say why instead.
		if cause := context.Cause(wctx); errors.Is(cause, errSilent) && ctx.Err() == nil {
			err = cause
		}
	}()
	// Opening the stream waits for a connection, and a new connection
	// to a server that went silent may wait for ever: a stream that
	// heard nothing within the deadline is given up as prove does.
	answered := &atomic.Bool{}
	deadline := w.live.ka.Time + w.live.ka.Timeout
	opening := time.AfterFunc(deadline, func() {
		if !answered.Load() {
			w.endSilent(cancel, fmt.Sprintf("%v for %v while opening a watch", errSilent, deadline))
		}
	})
	defer opening.Stop()
	// The call options clientv3 gives every call: wait for the
	// connection, and no 4 MiB cap on a response (a transaction of large
	// values is one response).
	raw, err := w.Client.ActiveConnection().NewStream(wctx, etcdwire.WatchDesc, etcdwire.WatchMethod,
		grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.ForceCodecV2(etcdwire.Codec{}))
	if err != nil {
		return rpctypes.Error(err)
	}
	stream := &lockedStream{ClientStream: raw}
	// Every watch starts at the revision after the lowest delivered, and
	// events a range already delivered are skipped below. A watch that
	// starts at a revision etcd already has is one etcd must catch up,
	// and it does that every 100 ms: the changes made in the first 100 ms
	// after a start reached the watcher in one lump, up to 100 ms late,
	// and were the tail of the time from a put's acknowledgement to its
	// line at 1,000 puts a second (measured with make bench-compare). One
	// that starts at the next revision is current at once. But etcd does
	// not answer a progress request while a watch of the stream starts
	// after its revision, that is, until something is written: see ahead.
	start := slices.Min(revs) + 1
	for _, r := range ranges {
		create := &pb.WatchCreateRequest{Key: []byte(r.key), StartRevision: start, ProgressNotify: len(ranges) > 1}
		if r.end != "" {
			create.RangeEnd = []byte(r.end)
		}
		if err := stream.SendMsg(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
			return rpctypes.Error(err)
		}
	}
	if p, ok := peer.FromContext(stream.Context()); ok && p.Addr != nil {
		w.peer = p.Addr.String()
	}
	at := w.peer
	heard := &atomic.Int64{} // when this stream last received anything
	heard.Store(time.Now().UnixNano())
	ah := &ahead{start: start}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { w.prove(wctx, stream, heard, at, cancel, ah, ranges[0].key, out) })
	var mg *merger // with several ranges, what puts their events in order
	if len(ranges) > 1 {
		mg = newMerger(revs)
		wg.Go(func() { mg.ask(wctx, stream) })
	}
	// etcd answers the creates in order, each with the id of its watch;
	// the events of a watch carry its id.
	ranged := make(map[int64]int, len(ranges))
	resp := &etcdwire.WatchResponse{}
	for {
		err := stream.RecvMsg(resp)
		if err == nil {
			answered.Store(true)
			now := time.Now()
			heard.Store(now.UnixNano())
			w.current(now, at)
			if resp.HasHeader && resp.Revision >= start {
				ah.end()
			}
		}
		switch {
		case err != nil:
			return rpctypes.Error(err)
		case resp.WatchID == clientv3.InvalidWatchID && !resp.Created && len(resp.Events) == 0 && resp.HasHeader:
			// The answer to a progress request: every watch of the
			// stream delivered everything up to the header's revision.
			r := resp.Revision
			if mg != nil {
				mg.answered(r)
				mg.release(out, true)
				continue
			}
			for i := range revs {
				revs[i] = max(revs[i], r)
			}
			out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: slices.Min(revs), Confirmed: true})
			continue
		case resp.CompactRevision != 0:
			return rpctypes.ErrCompacted
		case resp.Canceled && resp.CancelReason != "":
			return rpctypes.Error(status.Error(codes.FailedPrecondition, resp.CancelReason))
		case resp.Canceled:
			return rpctypes.ErrFutureRev
		case resp.Created:
			if len(ranged) == len(ranges) {
				return fmt.Errorf("etcd created more watches than asked for")
			}
			ranged[resp.WatchID] = len(ranged)
			if len(ranged) == len(ranges) && resp.Revision < start {
				ah.begin() // every watch is created, and starts after etcd's revision
			}
		}
		i, ok := ranged[resp.WatchID]
		if !ok {
			return fmt.Errorf("events of watch %d, which was not created", resp.WatchID)
		}
		if len(resp.Events) == 0 && !resp.Created && resp.HasHeader {
			// A progress notification: everything up to the header's
			// revision was delivered, so a quiet range moves on too.
			if mg != nil {
				mg.progress(i, resp.Revision)
			} else {
				revs[i] = max(revs[i], resp.Revision)
			}
		}
		// One batch per revision: one transaction, one batch.
		events := resp.Events
		for len(events) > 0 {
			r := events[0].KV.ModRevision
			n := 1
			for n < len(events) && events[n].KV.ModRevision == r {
				n++
			}
			if r <= revs[i] { // delivered before the stream broke
				events = events[n:]
				continue
			}
			cs := w.batch[:0] // out keeps none of it (flow.Sink)
			if mg != nil {
				cs = nil // held past this response
			}
			for k := range events[:n] {
				ev := &events[k]
				if c, ok := w.change(&ev.KV, ev.Type == mvccpb.DELETE, true, w.Keeps); ok {
					cs = append(cs, c)
				}
			}
			if mg != nil {
				mg.add(i, r, cs)
			} else {
				// With one range, events at r prove that everything up
				// to r was delivered.
				out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: r, Confirmed: true, Changes: cs})
				clear(cs)
				if w.batch = cs[:0]; cap(w.batch) > maxBatch {
					w.batch = nil // a large transaction's
				}
				revs[i] = r
			}
			events = events[n:]
		}
		if mg != nil {
			mg.release(out, false)
		}
	}
}

// maxBatch is the most changes whose room the watcher keeps from one
// revision to the next: etcd takes 128 operations per transaction unless
// told otherwise.
const maxBatch = 1024
