package etcdkv

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// A merger puts the events of several ranges, one etcd watch each on one
// stream, in revision order, one batch per revision, as one watch of one
// range would: etcd orders each watch's events, not the stream's. A
// watch that catches up (--rev, a resume) is sent its history in lumps of
// its own, so that one range's later revisions can come before another's
// earlier ones, and a transaction that changes keys of two ranges comes
// as one response from each. So the merger holds what it received until
// every range is known to have delivered up to it: by its own events, by
// a progress notification for its watch, or by the answer to a progress
// request for the whole stream, which the merger has asked for (ask)
// while it holds anything, as a quiet range says nothing by itself. It
// costs a change of several ranges the round trip of that request.
//
// It is used by watchOnce's reader alone.
type merger struct {
	// revs is watchOnce's: by range, the last revision delivered (put
	// to out); a resumed watch skips what it delivered. Every range has
	// delivered up to the same one.
	revs []int64
	// seen is, by range, the revision up to which the range's events
	// were received.
	seen []int64
	held map[int64][]flow.Change // received, not yet put, by revision
	// want: the merger holds something, and waits for a progress
	// answer; ask sends progress requests while it does.
	want  atomic.Bool
	kick  chan struct{} // a token: want was set
	heard chan struct{} // a token: a progress answer came
}

func newMerger(revs []int64) *merger {
	return &merger{revs: revs, seen: slices.Clone(revs), held: map[int64][]flow.Change{},
		kick: make(chan struct{}, 1), heard: make(chan struct{}, 1)}
}

// add holds range i's changes at revision rev (maybe none: a revision
// that the filter turned down all of; it is still a revision).
func (m *merger) add(i int, rev int64, cs []flow.Change) {
	m.held[rev] = append(m.held[rev], cs...)
	m.seen[i] = max(m.seen[i], rev)
}

// progress notes that range i delivered everything up to rev.
func (m *merger) progress(i int, rev int64) { m.seen[i] = max(m.seen[i], rev) }

// answered notes the answer to a progress request: every range delivered
// everything up to rev.
func (m *merger) answered(rev int64) {
	for i := range m.seen {
		m.seen[i] = max(m.seen[i], rev)
	}
	select {
	case m.heard <- struct{}{}:
	default:
	}
}

// release puts to out, in order, one batch for each revision held that
// every range delivered, each confirming that everything up to it was
// delivered; with confirm (a progress answer), a confirmation of the
// revision every range delivered if there was nothing to put. Then, if
// it still holds something, it has ask request progress.
func (m *merger) release(out flow.Sink, confirm bool) {
	upTo := slices.Min(m.seen)
	for _, rev := range slices.Sorted(maps.Keys(m.held)) {
		if rev > upTo {
			break
		}
		out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: rev, Confirmed: true, Changes: m.held[rev]})
		delete(m.held, rev)
		confirm = false
	}
	if confirm {
		out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: upTo, Confirmed: true})
	}
	for i := range m.revs {
		m.revs[i] = max(m.revs[i], upTo)
	}
	m.want.Store(len(m.held) > 0)
	if len(m.held) > 0 {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// askAgain is how long a progress request the merger sent may go
// unanswered before it sends another: etcd drops one that comes while a
// watch of the stream is catching up, which it does every 100ms.
const askAgain = 100 * time.Millisecond

// ask sends stream a progress request whenever the merger starts to
// hold something, and again after each answer, or askAgain without one,
// while it still does; until ctx ends. It is the merger's only sender.
func (m *merger) ask(ctx context.Context, stream *lockedStream) {
	progress := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	t := time.NewTimer(askAgain)
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		}
		for m.want.Load() {
			if stream.SendMsg(progress) != nil {
				return // the reader hears why
			}
			t.Reset(askAgain)
			select {
			case <-ctx.Done():
				return
			case <-m.heard:
			case <-t.C:
			}
		}
	}
}

// lockedStream is a watch stream that two goroutines send on: prove, and
// a merger's ask. gRPC allows one sender at a time.
type lockedStream struct {
	grpc.ClientStream
	mu sync.Mutex
}

func (s *lockedStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}
