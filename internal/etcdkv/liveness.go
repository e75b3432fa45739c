package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdwire"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// errSilent is wrapped by the error that ends a watch that heard nothing
// from etcd, not even an answer to a progress request, for
// Keepalive.Time + Keepalive.Timeout.
var errSilent = errors.New("no answer")

// prove keeps a watch stream proving that it is alive, until ctx ends
// (see dial.Keepalive.Prove): the question is a progress request, which
// etcd answers on the stream (also because etcd drops one that comes
// while a watch is catching up, it is asked again every second). A
// stream silent for the keepalive deadline is ended with errSilent
// through cancel, and the connections that went silent with it are
// closed, so that the next stream goes over a new one. Once the creates
// are sent, prove sends on stream, and so does, with several ranges, a
// merger's ask (hence a lockedStream).
//
// While the watches start after etcd's revision (ah), etcd drops the
// progress requests, so prove also asks for etcd's revision (a
// linearizable read of key alone, keys only): if it is still the one
// before the watches' start, nothing was written since, and that
// answer confirms the watches current at it, as a progress answer
// would, with a Confirmed batch put to out. The read goes over the
// client's connections, which may reach another member: while nothing is
// written it proves etcd rather than this stream, which can miss nothing
// meanwhile; once something is written, progress answers prove the stream
// again, or its silence ends it.
func (w *Watcher) prove(ctx context.Context, stream grpc.ClientStream, heard *atomic.Int64, peer string, cancel context.CancelCauseFunc, ah *ahead, key string, out flow.Sink) {
	progress := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	probe := &pb.RangeRequest{Key: []byte(key), KeysOnly: true, Limit: 1}
	w.live.ka.Prove(ctx, w.ConfirmEvery, heard,
		func(ctx context.Context) (bool, error) {
			if err := stream.SendMsg(progress); err != nil || !ah.on.Load() {
				return false, err
			}
			resp := &etcdwire.RangeResponse{}
			if err := w.Client.ActiveConnection().Invoke(ctx, etcdwire.RangeMethod, probe, resp, grpc.ForceCodecV2(etcdwire.Codec{})); err != nil || !resp.HasHeader {
				return false, nil // no answer this round
			}
			if !ah.confirm(resp.Revision, out) {
				return false, nil // written since: the next progress request is answered
			}
			w.current(time.Now(), peer)
			return true, nil
		},
		func(quiet time.Duration) {
			w.endSilent(cancel, fmt.Sprintf("%v for %v, not even to a progress request", errSilent, quiet.Round(time.Millisecond)))
		})
}

// current records a confirmation that the watch is current, heard
// through peer (an address), and says that the watch is back if it was
// lost (dial.Outage.Up).
func (w *Watcher) current(now time.Time, peer string) {
	w.live.heard(now)
	w.outage.Up(peer)
}

// ahead says whether the watches of a stream start after etcd's revision
// (start is theirs), which etcd's answer to their creation tells and the
// first response at start or later ends. While it lasts, prove confirms
// them current at start - 1 (confirm), which etcd's progress answers do
// once it ends. The stream's reader ends it before it puts a batch (they
// are all at start or later), so the two never put at once, nor out of
// order. With several ranges, etcd may send one watch's events before
// another's creation, so that the reader puts a batch before it begins;
// then etcd's revision, read after that, is start or later, and confirm
// ends it without putting.
type ahead struct {
	start int64
	on    atomic.Bool
	mu    sync.Mutex // held while on is cleared, and by confirm
}

func (a *ahead) begin() { a.on.Store(true) }

// end is called by the stream's reader for each response at start or
// later, before it puts a batch.
func (a *ahead) end() {
	if a.on.Load() {
		a.mu.Lock()
		a.on.Store(false)
		a.mu.Unlock()
	}
}

// confirm puts a Confirmed batch at rev to out and returns true if the
// watches are still ahead and rev, etcd's revision, is the one before
// their start; it ends ahead if rev is later.
func (a *ahead) confirm(rev int64, out flow.Sink) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.on.Load() {
		return false
	}
	if rev >= a.start {
		a.on.Store(false)
	}
	if rev != a.start-1 {
		return false
	}
	out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: rev, Confirmed: true})
	return true
}

// closeSilent closes Client's connections that read nothing for
// Keepalive.Timeout, and returns how many: the connection a silent watch
// used read nothing either, and others that read nothing for that long
// are no loss (gRPC connects them again at once).
func (w *Watcher) closeSilent() int {
	if w.Conns == nil {
		return 0
	}
	return w.Conns.CloseSilent(w.live.ka.Timeout)
}

// endSilent ends a watch that heard nothing (what says so, with the
// quiet it heard), then closes the connections that went silent. In that
// order: a closed connection fails the watch stream at once, and its
// error ("use of closed network connection") would otherwise reach the
// watch loop before the cause, and pass for another kind of loss.
func (w *Watcher) endSilent(cancel context.CancelCauseFunc, what string) {
	cause := &silentError{what: what}
	cancel(cause)
	cause.closed.Store(int32(w.closeSilent()))
}

// silentError is the cause of a watch ended by endSilent: errSilent, with
// what it heard nothing to, and how many connections it then closed.
type silentError struct {
	what   string
	closed atomic.Int32
}

func (e *silentError) Error() string {
	if n := e.closed.Load(); n > 0 {
		return fmt.Sprintf("%s: the connection went silent; %d silent connection(s) closed", e.what, n)
	}
	return e.what + ": the connection went silent"
}

func (e *silentError) Unwrap() error { return errSilent }

// liveness is what a Watcher knows of being current, across the streams
// and listings of one Run.
type liveness struct {
	ka        dial.Keepalive // with the defaults
	onCurrent func(current bool)

	last  atomic.Int64 // unix nanoseconds: the last confirmation
	stale atomic.Bool  // onCurrent(false) was the last call
	mu    sync.Mutex   // held while stale changes, so that onCurrent's calls alternate
}

// heard records a confirmation at now, and calls onCurrent(true) if the
// watcher was stale.
func (l *liveness) heard(now time.Time) {
	l.last.Store(now.UnixNano())
	if !l.stale.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stale.Load() {
		l.stale.Store(false)
		if l.onCurrent != nil {
			l.onCurrent(true)
		}
	}
}

// monitor calls onCurrent(false) each time Keepalive.Time +
// Keepalive.Timeout pass without a confirmation, until ctx ends.
func (l *liveness) monitor(ctx context.Context) {
	deadline := l.ka.Time + l.ka.Timeout
	for {
		last := l.last.Load()
		if backoff.Sleep(ctx, time.Until(time.Unix(0, last).Add(deadline))) != nil {
			return
		}
		l.mu.Lock()
		if l.last.Load() == last && !l.stale.Load() {
			l.stale.Store(true)
			if l.onCurrent != nil {
				l.onCurrent(false)
			}
		}
		l.mu.Unlock()
		// Wait for the next confirmation.
		for l.last.Load() == last {
			if backoff.Sleep(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
	}
}
