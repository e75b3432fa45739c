package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/etcdwire"
	"github.com/nodewatch/nodewatch/internal/flow"
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

// list reads every range at one revision (at, or the current one
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
			w.Logf.Printf("list %s: %v; listing again", w.name(), err)
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
// order; one range after the other, which do not overlap: each key comes
// once), without keeping it: a large listing costs memory for one page.
// It returns the revision of the listing; an error from page ends it and
// is returned. Transient errors are retried where the listing stopped;
// errors are as Run's, and a listing whose revision is compacted before
// its last page was read fails (it cannot start over: pages were handed
// on).
func (w *Watcher) List(ctx context.Context, page func([]flow.Change) error) (int64, error) {
	defer w.report()()
	rev, err := w.pages(ctx, w.StartRev, page)
	if err = w.startRevError(err); errors.Is(err, errListCompacted) {
		return 0, fmt.Errorf("list %s: %w; run again", w.name(), err)
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

// pages reads the ranges at one revision (rev, or the current one when
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
	for failed := false; ; failed = true {
		resp := &etcdwire.RangeResponse{}
		err := rpctypes.Error(w.Client.ActiveConnection().Invoke(ctx, etcdwire.RangeMethod, req, resp,
			grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.ForceCodecV2(etcdwire.Codec{})))
		switch {
		case err == nil:
			if failed {
				w.outage.Up(w.peer)
			}
			return resp, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, rpctypes.ErrCompacted):
			return nil, errListCompacted
		case errors.Is(err, rpctypes.ErrFutureRev):
			return nil, err
		case refused(err):
			return nil, fmt.Errorf("list %s: %w", w.name(), err)
		}
		w.outage.Lost(w.peer, err, time.Time{})
		w.Debugf.Printf("list %s at rev %d: retrying", w.name(), rev)
		if err := b.Wait(ctx); err != nil {
			return nil, err
		}
	}
}
