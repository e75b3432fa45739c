// Package etcdkv follows a key or a prefix in etcd: it lists the state at
// one revision, then watches from the next, and hands the result to a
// flow.Sink as batches.
//
// It is the reference list-then-watch of etcd's mirror.Syncer, plus the
// parts a long-running watcher needs: the initial list is paged at a fixed
// revision (a prefix with 100k keys never arrives as one response); a
// broken watch resumes at the last seen revision + 1; when the history it
// needs is gone (compaction), it lists again and hands over the full state
// as a resync, for the follower to turn into differences. Transient errors
// are logged and retried with capped backoff, never returned.
//
// It also owns what a key and its value become: Rules name a key's
// segments and decode its value into the object nodewatch prints (Object,
// ValueMode), and Mgmt knows the areas of mgmt's World. The command hands
// them down as values; nothing here calls back into it.
package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdwire"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Without Watcher.PageSize, a listing's pages are sized by bytes: the
// first asks for FirstPageSize keys, each later one for as many keys of
// the size seen so far as make PageBytes, within [FirstPageSize,
// MaxPageSize]. Small pages cost more than their round trips: etcd counts
// every key from a page's start to the end of the range to answer it
// (the response's count), so a listing of n keys in pages of k visits
// about n²/2k keys. A listing of 100,000 records in pages of 1,000 took
// etcd 1.2 s, in pages of 10,000 0.5 s. Two pages are held at most.
const (
	FirstPageSize = 1000
	MaxPageSize   = 10000
	PageBytes     = 8 << 20
)

// Watcher follows one key, or every key under a prefix.
type Watcher struct {
	Client *clientv3.Client
	Key    string
	Prefix bool
	// PageSize, if positive, is the number of keys each list request asks
	// for; 0 sizes pages by bytes (see PageBytes).
	PageSize int64
	// Decode turns a key-value into the object the follower sees, a new
	// one each time: the watcher gives a *jsondoc.Doc that it keeps no
	// reference to (jsondoc.Doc.Give) to whoever it hands it on to. An
	// error skips the record (it is logged with its key). Nil passes (a
	// copy of) the *mvccpb.KeyValue itself. kv's key and value are only
	// valid during the call: a watch decodes them in place, in a buffer
	// that the next response overwrites.
	Decode func(kv *mvccpb.KeyValue) (any, error)
	// DecodeFrom, if set, decodes the key-values of watch events instead
	// of Decode, given the object last decoded from a watch event for the
	// same key (never nil; see change), which it may read to decode faster
	// (Rules.Decoders); it must decode exactly as Decode does.
	// Listings use Decode, so that `--once` keeps nothing for it. The
	// watcher keeps that object, and shares a *jsondoc.Doc with whoever
	// it hands it on to (jsondoc.Doc.Share): it frees its own hold once
	// the key's next event replaces it. So DecodeFrom must return a new
	// object that shares no memory with ref, as ObjectFrom does.
	DecodeFrom func(kv *mvccpb.KeyValue, ref any) (any, error)
	// ID turns a key into the id of its object. Nil uses the key.
	ID func(key string) string
	// Logf reports what the watcher retries or skips. Nil discards.
	Logf func(format string, args ...any)
	// MaxBackoff caps the wait between retries; 0 means 5s.
	MaxBackoff time.Duration
	// Keepalive says how often the watch must prove that it is current
	// (see Run); zero fields take the defaults.
	Keepalive dial.Keepalive
	// Conns, if set, holds Client's connections: a watch that found etcd
	// silent closes those that went silent with it, so that the next
	// watch goes over a new connection.
	Conns *dial.Conns
	// ConfirmEvery, if positive and shorter than Keepalive.Time, is how
	// long a quiet watch waits before it asks etcd to confirm that it is
	// current (for --heartbeat).
	ConfirmEvery time.Duration
	// OnCurrent, if set, is called when the watcher stops being current
	// (false: nothing confirmed it for Keepalive.Time + Keepalive.Timeout,
	// whatever the reason: a silent connection, etcd down, no leader)
	// and when it is current again (true). It is called from the
	// watcher's goroutines, never twice in a row with the same value,
	// and must not block.
	OnCurrent func(current bool)
	// OnRestart, if set, is called each time the watch starts again:
	// with compacted false when it resumes after an error or a silent
	// connection, true when the history it would resume at is compacted
	// and it lists again. It is called from Run's goroutine.
	OnRestart func(compacted bool)

	// StartRev, if positive, is where the first listing is read: the
	// state as it was at that revision (etcdctl watch --rev). The watch
	// then follows every revision after it, one batch each, and goes on
	// live. A StartRev that is compacted, or ahead of etcd, ends Run with
	// ErrStartRev: the state at it cannot be read, and a listing of
	// another revision would pass for it.
	StartRev int64

	// Keeps, if set, is the reader's filter, which the watcher asks about
	// each event's object as it makes it, while it is fresh in the cache:
	// it reports whether the filter keeps obj (keep), when it can tell
	// fast and without an error (decided). An object it turns down leaves
	// the reader's view as a deletion does, so the watcher hands the
	// change on as one and lets go of the object; when the key's last
	// change was turned down too, it leaves the change out (the reader
	// does not have the key). One it keeps is handed on as Kept, and the
	// follower does not ask again. Undecided objects are left to the
	// follower.
	Keeps func(obj any) (keep, decided bool)
	// Listed, if set, is told how many objects a listing has read so far
	// (a terminal's progress meter); the listing ends with the Put of its
	// full batch. It is called from Run's goroutine.
	Listed func(n int)

	// Also holds more prefixes (with Prefix only) that are part of the
	// same state: listed at the revision of Key's listing and watched from
	// the next, as one prefix would be. mgmt's collect reads two prefixes
	// (exports to one host and to every host); etcd narrows each. They
	// must not overlap each other or Key.
	Also []string

	// onPage, if set, is called with the size of every list response
	// (a test hook).
	onPage func(keys int)

	live *liveness // of the current Run
	// keys is, during Run, the state of each key under Key, by key: every
	// key that the listing or an event brought, also those a filter keeps
	// out of the view (about 100 bytes a key, with no object unless
	// DecodeFrom keeps one). Each listing makes it afresh and a delete
	// takes its key out. List (--once) keeps none.
	keys map[string]*keyState
	// batch is the scratch of watchOnce: a revision's changes (up to
	// maxBatch of them kept between revisions).
	batch []flow.Change
}

// keyRange is a range of keys as etcd takes it: [key, end), or key alone
// when end is "".
type keyRange struct{ key, end string }

// ranges returns what w follows, in ascending key order.
func (w *Watcher) ranges() []keyRange {
	if !w.Prefix {
		return []keyRange{{key: w.Key}}
	}
	var rs []keyRange
	for _, p := range append([]string{w.Key}, w.Also...) {
		r := keyRange{key: p, end: clientv3.GetPrefixRangeEnd(p)}
		if p == "" {
			r.key = "\x00" // every key; etcd refuses an empty one (as WithPrefix does)
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b keyRange) int { return strings.Compare(a.key, b.key) })
	return rs
}

// Run lists, then watches, putting batches into out, until ctx ends. The
// first batch is the initial listing (Cause CauseInitial, Synced); full
// listings after a compaction are CauseResync; every etcd revision seen by
// the watch is one CauseChange batch. Run returns ctx.Err(), or an error
// when etcd refuses the request for good (permission denied, bad
// credentials, an invalid request); it closes nothing: out belongs to the
// caller.
func (w *Watcher) Run(ctx context.Context, out flow.Sink) error {
	w.live = &liveness{ka: w.Keepalive.OrDefaults(), onCurrent: w.OnCurrent}
	w.live.heard(time.Now())
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { w.live.monitor(ctx) })
	cause := flow.CauseInitial
	start := w.StartRev
	for {
		changes, rev, err := w.list(ctx, start, out)
		if err != nil {
			return err // ctx's, or the StartRev that cannot be read
		}
		start = 0
		w.live.heard(time.Now())
		out.Put(flow.Batch{Changes: changes, Cause: cause, Synced: true, Rev: rev, Confirmed: true})
		cause = flow.CauseResync
		if err := w.watch(ctx, rev, out); err != nil {
			return err
		}
		// The history after rev is gone: list again.
	}
}

// list reads the whole range at one revision (at, or the current one
// when at is 0), page by page, retrying transient errors until ctx ends;
// when the current revision is compacted before the last page was read,
// it starts again at the new current one. An at that cannot be read is
// ErrStartRev. It reports how far it got to Listed.
func (w *Watcher) list(ctx context.Context, at int64, out flow.Sink) ([]flow.Change, int64, error) {
	for {
		w.keys = map[string]*keyState{}
		var changes []flow.Change
		rev, err := w.pages(ctx, at, func(page []flow.Change) error {
			changes = append(changes, page...)
			if w.Listed != nil {
				w.Listed(len(changes))
			}
			return nil
		})
		if at == 0 && errors.Is(err, errListCompacted) {
			w.logf("list %q: %v; listing again", w.Key, err)
			continue
		}
		return changes, rev, w.startRevError(err)
	}
}

// ErrStartRev is a Watcher.StartRev whose state cannot be read.
var ErrStartRev = errors.New("cannot start at the revision asked for")

// errListCompacted: the revision of a listing was compacted before its
// last page was read.
var errListCompacted = errors.New("the revision of the listing was compacted while it was read")

// List reads the state once, as the initial listing of Run would be, and
// hands it to page one page at a time, in ascending key order (etcd's
// order), without keeping it: a large listing costs memory for one page.
// It returns the revision of the listing; an error from page ends it and
// is returned. Transient errors are retried where the listing stopped;
// errors are as Run's, and a listing whose revision is compacted before
// its last page was read fails (it cannot start over: pages were handed
// on).
func (w *Watcher) List(ctx context.Context, page func([]flow.Change) error) (int64, error) {
	rev, err := w.pages(ctx, w.StartRev, page)
	if err = w.startRevError(err); errors.Is(err, errListCompacted) {
		return 0, fmt.Errorf("list %q: %w; run again", w.Key, err)
	}
	return rev, err
}

// startRevError is err, or ErrStartRev where err says that StartRev
// cannot be read.
func (w *Watcher) startRevError(err error) error {
	switch {
	case w.StartRev != 0 && errors.Is(err, errListCompacted):
		return fmt.Errorf("%w: revision %d is compacted; etcd no longer has the state at it", ErrStartRev, w.StartRev)
	case w.StartRev != 0 && errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: revision %d is ahead of etcd's current revision", ErrStartRev, w.StartRev)
	}
	return err
}

// pages reads the range at one revision (rev, or the current one when
// rev is 0), page by page, and hands each page's changes to fn. A
// transient error is retried from where the listing stopped, at the same
// revision; it returns errListCompacted when that revision is gone,
// rpctypes.ErrFutureRev when it is ahead of etcd, ctx's error when ctx
// ends, and an error when etcd refuses for good.
func (w *Watcher) pages(ctx context.Context, rev int64, fn func([]flow.Change) error) (int64, error) {
	for _, r := range w.ranges() {
		var err error
		if rev, err = w.rangePages(ctx, r, rev, fn); err != nil {
			return 0, err
		}
	}
	return rev, nil
}

// rangePages lists one range at rev (0: the current revision, which it
// returns), page by page. The next page is fetched while fn handles the
// current one, so that etcd's time and the network's overlap nodewatch's
// decoding and printing; at most two pages are held.
func (w *Watcher) rangePages(ctx context.Context, r keyRange, rev int64, fn func([]flow.Change) error) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()       // ends a fetch in flight when fn fails
	var keys, size int64 // listed so far: their number and bytes
	resp, err := w.getPage(ctx, r, r.key, rev, w.pageSize(keys, size))
	for {
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Revision
		}
		for _, kv := range resp.KVs {
			keys, size = keys+1, size+int64(len(kv.Key)+len(kv.Value))
		}
		more := resp.More && len(resp.KVs) > 0 && r.end != ""
		var next chan pageResult
		if more {
			next = make(chan pageResult, 1)
			go func(key string, rev, limit int64) {
				resp, err := w.getPage(ctx, r, key, rev, limit)
				next <- pageResult{resp, err}
			}(string(resp.KVs[len(resp.KVs)-1].Key)+"\x00", rev, w.pageSize(keys, size))
		}
		if w.onPage != nil {
			w.onPage(len(resp.KVs))
		}
		changes := make([]flow.Change, 0, len(resp.KVs))
		for i := range resp.KVs {
			if c, ok := w.change(&resp.KVs[i], false, false, nil); ok {
				changes = append(changes, c)
			}
		}
		if err := fn(changes); err != nil {
			return 0, err
		}
		if !more {
			return rev, nil
		}
		p := <-next
		resp, err = p.resp, p.err
	}
}

// pageResult is a page fetched ahead.
type pageResult struct {
	resp *etcdwire.RangeResponse
	err  error
}

// pageSize is the number of keys to ask for next, keys of size bytes
// having been listed (see PageBytes).
func (w *Watcher) pageSize(keys, size int64) int64 {
	switch {
	case w.PageSize > 0:
		return w.PageSize
	case keys == 0:
		return FirstPageSize
	}
	return min(max(PageBytes/max(size/keys, 1), FirstPageSize), MaxPageSize)
}

// getPage gets one page of r from key at rev, at most limit keys,
// retrying transient errors. The page is read in place (etcdwire.RangeResponse),
// over the connection the client's own requests take, with its
// interceptors (credentials, a token refreshed).
func (w *Watcher) getPage(ctx context.Context, r keyRange, key string, rev, limit int64) (*etcdwire.RangeResponse, error) {
	b := backoff.Backoff{Max: w.MaxBackoff}
	req := &pb.RangeRequest{Key: []byte(key), Limit: limit, Revision: rev}
	if r.end != "" {
		req.RangeEnd = []byte(r.end)
	}
	for {
		resp := &etcdwire.RangeResponse{}
		err := rpctypes.Error(w.Client.ActiveConnection().Invoke(ctx, etcdwire.RangeMethod, req, resp,
			grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.ForceCodecV2(etcdwire.Codec{})))
		switch {
		case err == nil:
			return resp, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, rpctypes.ErrCompacted):
			return nil, errListCompacted
		case errors.Is(err, rpctypes.ErrFutureRev):
			return nil, err
		case refused(err):
			return nil, fmt.Errorf("list %q: %w", w.Key, err)
		}
		w.logf("list %q at rev %d: %v (retrying)", w.Key, rev, err)
		if err := b.Wait(ctx); err != nil {
			return nil, err
		}
	}
}

// watch follows changes after rev until the history is gone (returns nil)
// or ctx ends (returns ctx.Err()). Each range (Key, and Also's prefixes)
// keeps the last revision it delivered, and a broken watch resumes every
// range from the lowest (see watchOnce), each skipping what it delivered
// already: one quiet range does not make another deliver again.
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
			w.logf("watch %q from rev %d: history compacted; listing again", w.Key, slices.Min(revs)+1)
			w.restarted(true)
			return nil
		}
		if refused(err) {
			return fmt.Errorf("watch %q: %w", w.Key, err)
		}
		if !slices.Equal(before, revs) {
			b.Reset() // progress was made: this is a fresh failure
		}
		w.live.lost()
		w.logf("watch %q: %v; resuming at rev %d", w.Key, err, slices.Min(revs)+1)
		w.restarted(false)
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
}

// watchOnce runs one etcd watch per range on one stream, and delivers
// range i's changes after revs[i], keeping revs[i] at the last revision
// delivered for it. It returns the error that ended the stream.
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
			cancel(fmt.Errorf("%w from etcd for %v while opening a watch: the connection went silent (%d silent connection(s) closed)", errSilent, deadline, w.closeSilent()))
		}
	})
	defer opening.Stop()
	// The call options clientv3 gives every call: wait for the
	// connection, and no 4 MiB cap on a response (a transaction of large
	// values is one response).
	stream, err := w.Client.ActiveConnection().NewStream(wctx, etcdwire.WatchDesc, etcdwire.WatchMethod,
		grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.ForceCodecV2(etcdwire.Codec{}))
	if err != nil {
		return rpctypes.Error(err)
	}
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
	server := "etcd"
	if p, ok := peer.FromContext(stream.Context()); ok && p.Addr != nil {
		server = "etcd at " + p.Addr.String()
	}
	heard := &atomic.Int64{} // when this stream last received anything
	heard.Store(time.Now().UnixNano())
	ah := &ahead{start: start}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { w.prove(wctx, stream, heard, server, cancel, ah, ranges[0].key, out) })
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
			w.current(now, server)
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
			revs[i] = max(revs[i], resp.Revision)
		}
		// One batch per revision: one transaction, one batch.
		events := resp.Events
		for len(events) > 0 {
			r := events[0].KV.ModRevision
			n := 1
			for n < len(events) && events[n].KV.ModRevision == r {
				n++
			}
			if r > revs[i] {
				// With one range, events at r prove that everything up
				// to r was delivered; with several, another range may
				// still be behind.
				b := flow.Batch{Cause: flow.CauseChange, Synced: true, Rev: r, Confirmed: len(ranges) == 1,
					Changes: w.batch[:0]} // out keeps none of it (flow.Sink)
				for k := range events[:n] {
					ev := &events[k]
					if c, ok := w.change(&ev.KV, ev.Type == mvccpb.DELETE, true, w.Keeps); ok {
						b.Changes = append(b.Changes, c)
					}
				}
				out.Put(b)
				clear(b.Changes)
				if w.batch = b.Changes[:0]; cap(w.batch) > maxBatch {
					w.batch = nil // a large transaction's
				}
				revs[i] = r
			}
			events = events[n:]
		}
	}
}

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
// are sent, prove is the only sender on stream.
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
func (w *Watcher) prove(ctx context.Context, stream grpc.ClientStream, heard *atomic.Int64, server string, cancel context.CancelCauseFunc, ah *ahead, key string, out flow.Sink) {
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
			w.current(time.Now(), server)
			return true, nil
		},
		func(quiet time.Duration) {
			cancel(fmt.Errorf("%w from %s for %v, not even to a progress request: the connection went silent (%d silent connection(s) closed)", errSilent, server, quiet.Round(time.Millisecond), w.closeSilent()))
		})
}

// current records a confirmation that the watch is current, heard
// through server, and logs it if it ends a time without one.
func (w *Watcher) current(now time.Time, server string) {
	if d, ok := w.live.heard(now); ok {
		w.logf("watch %q: current again via %s after %v without confirmation", w.Key, server, d.Round(time.Millisecond))
	}
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

// liveness is what a Watcher knows of being current, across the streams
// and listings of one Run.
type liveness struct {
	ka        dial.Keepalive // with the defaults
	onCurrent func(current bool)

	last     atomic.Int64 // unix nanoseconds: the last confirmation
	troubled atomic.Bool  // lostAt or stale is set
	mu       sync.Mutex   // guards the fields below
	// lostAt: unix nanoseconds of the last confirmation before a stream
	// was lost (0: none lost since).
	lostAt int64
	stale  bool // onCurrent(false) was the last call
}

// heard records a confirmation at now. If a stream was lost, or the
// watcher went stale, since the confirmation before, it returns how long
// the watcher went without one, and true.
func (l *liveness) heard(now time.Time) (time.Duration, bool) {
	prev := l.last.Swap(now.UnixNano())
	if !l.troubled.Load() {
		return 0, false
	}
	l.mu.Lock()
	lostAt, stale := l.lostAt, l.stale
	l.lostAt, l.stale = 0, false
	l.troubled.Store(false)
	if stale && l.onCurrent != nil {
		l.onCurrent(true)
	}
	l.mu.Unlock()
	if lostAt == 0 {
		lostAt = prev
	}
	return now.Sub(time.Unix(0, lostAt)), true
}

// lost records that a stream ended.
func (l *liveness) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostAt == 0 {
		l.lostAt = l.last.Load()
	}
	l.troubled.Store(true)
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
		if l.last.Load() == last && !l.stale {
			l.stale = true
			l.troubled.Store(true)
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

// change turns a key-value into a Change. A record that cannot be decoded
// is logged and becomes an Undecodable change, so that the follower keeps
// what it printed for it (also through a resync) instead of calling it
// deleted. During Run, the key's id comes from w.keys; with DecodeFrom,
// the value of a watch event (event) of fromMin bytes or more is decoded
// from the key's object of its last such event, and kept as the next
// one's. An object left by a value that has since shrunk stays: any
// reference decodes the same. An event's object that Keeps turns down is
// let go of at once, and the change handed on as a deletion, or, when the
// key's last change was turned down too, not at all (false): the reader
// does not have the key, and the deletion would tell it nothing. One it
// keeps is handed on as Kept.
func (w *Watcher) change(kv *mvccpb.KeyValue, deleted, event bool, keeps func(any) (bool, bool)) (flow.Change, bool) {
	ks := w.keyState(kv.Key)
	out := ks.out
	ks.out = false
	c := flow.Change{ID: ks.id, Deleted: deleted, Rev: kv.ModRevision}
	if deleted {
		ks.keep(nil)
		delete(w.keys, string(kv.Key))
		return c, true
	}
	if w.Decode == nil {
		// kv's bytes may be the watch stream's (see Decode).
		kv := *kv
		kv.Key, kv.Value = slices.Clone(kv.Key), slices.Clone(kv.Value)
		c.Object = &kv
		return c, true
	}
	large := event && w.DecodeFrom != nil && len(kv.Value) >= fromMin
	var obj any
	var err error
	if large && ks.last != nil {
		obj, err = w.DecodeFrom(kv, ks.last)
	} else {
		obj, err = w.Decode(kv)
	}
	if err != nil {
		w.logf("skipping %q at rev %d: %v", kv.Key, kv.ModRevision, err)
		ks.keep(nil)
		c.Undecodable = true
		return c, true
	}
	if large { // an event: Run's, which keeps ks
		ks.keep(obj)
	} else if d, ok := obj.(*jsondoc.Doc); ok {
		d.Give() // nothing here keeps it
	}
	if keeps != nil {
		keep, decided := keeps(obj)
		if decided && !keep {
			jsondoc.Free(obj) // the hold it would have been handed on with
			c.Deleted, ks.out = true, true
			return c, !out
		}
		c.Kept = decided
	}
	c.Object = obj
	return c, true
}

// A keyState is what Run keeps of a key in the view (Watcher.keys).
type keyState struct {
	// id is the id of every change to the key, made once: the maps a
	// change meets on its way (the hand-off's, the view's) find the same
	// string by its pointer, without reading its bytes again.
	id string
	// last is, with DecodeFrom, the key's object of its last watch
	// event of fromMin bytes or more.
	last any
	// out: the key's last change was handed on as one the reader's
	// filter turns down (a deletion), so the reader does not have it.
	// Following 1,000 node records with a filter that keeps the UP ones,
	// while the others get heartbeats, new addresses and puts of the
	// same bytes (make bench-compare's live load), two fifths of the
	// changes are to records that the filter turned down before and turns
	// down again: handed on, each cost the hand-off and the view a lookup
	// of its id.
	out bool
}

// keep makes obj the key's last object (nil: none), shared with the
// view (jsondoc.Doc.Share), and lets go of the one before: whichever of
// the watcher and the view lets go of an object last frees it, for the
// next to be made from.
func (ks *keyState) keep(obj any) {
	if d, ok := obj.(*jsondoc.Doc); ok {
		if last, _ := ks.last.(*jsondoc.Doc); d == last {
			return // not DecodeFrom's (see there), but never a Doc freed as it is handed on
		}
		d.Share()
	}
	jsondoc.Free(ks.last)
	ks.last = obj
}

// keyState returns key's state in w.keys, made if it is new; outside
// Run, a state of its own that nothing keeps.
func (w *Watcher) keyState(key []byte) *keyState {
	if ks, ok := w.keys[string(key)]; ok {
		return ks
	}
	k := string(key)
	ks := &keyState{id: k}
	if w.ID != nil {
		ks.id = w.ID(k)
	}
	if w.keys != nil {
		w.keys[k] = ks
	}
	return ks
}

// maxBatch is the most changes whose room the watcher keeps from one
// revision to the next: etcd takes 128 operations per transaction unless
// told otherwise.
const maxBatch = 1024

// fromMin is the smallest value DecodeFrom is used for. Below it, keeping
// and finding the last state costs more than reading the value again: in
// transactions of 50 changes, records of 200 B and 600 B took 5–10% more
// CPU with every value decoded from its last state, records of 4 KiB 11%
// less (nodewatch's CPU per change, following 1,000 keys with a filter,
// measured with make bench-compare).
const fromMin = 1 << 10

func (w *Watcher) restarted(compacted bool) {
	if w.OnRestart != nil {
		w.OnRestart(compacted)
	}
}

func (w *Watcher) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}
