// Package etcdkv follows keys or prefixes in etcd: it lists the state at
// one revision, then watches from the next, and hands the result to a
// flow.Sink as batches.
//
// It is the reference list-then-watch of etcd's mirror.Syncer, plus the
// parts a long-running watcher needs: the initial list is paged at a fixed
// revision (a prefix with 100k keys never arrives as one response); a
// broken watch resumes at the last seen revision + 1; when the history it
// needs is gone (compaction), it lists again and hands over the full state
// as a resync, for the follower to turn into differences. Transient errors
// are retried with capped backoff, never returned; the user is told of
// them as a dial.Outage tells: one line when the watch is lost, one when
// it is current again, every failed attempt in between on Debugf only.
//
// It also owns what a key and its value become: Rules name a key's
// segments and decode its value into the object nodewatch prints (Object,
// ValueMode), and Mgmt knows the areas of mgmt's World. The command hands
// them down as values; nothing here calls back into it.
package etcdkv

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// Watcher follows keys, or every key under prefixes, as one state.
type Watcher struct {
	Client *clientv3.Client
	// Keys are the keys followed, or with Prefix the prefixes; at least
	// one. They may repeat and overlap: each key is followed once (see
	// Followed). With several, they are listed at one revision and
	// watched from the next, one etcd watch each on one stream, whose
	// events are put in revision order, one batch per revision, as one
	// watch's are (see merger).
	Keys   []string
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
	// Logf says when the watch is lost and when it is current again (see
	// dial.Outage), and what the watcher skips. Nil discards.
	Logf dial.Logf
	// Debugf says every failed attempt between a loss and the recovery,
	// and where the watch resumes (-v). Nil discards.
	Debugf dial.Logf
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

	// onPage, if set, is called with the size of every list response
	// (a test hook).
	onPage func(keys int)

	live *liveness // of the current Run
	// outage tells of the losses of the current Run or List: Source's,
	// which told of connecting, or one of the watcher's own.
	outage *dial.Outage
	// peer is the address of etcd that the last watch stream went to (or
	// the client's endpoints, before one did).
	peer string
	// keys is, during Run, the state of each key followed, by key: every
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

// Followed returns what a Watcher with keys (prefixes, with prefix)
// follows: the keys in ascending order, each once, and with prefix
// without those that start with another (which covers them: "" covers
// every key). Their ranges do not overlap, so that every key is listed
// and watched once, and listing them in this order lists in key order.
func Followed(keys []string, prefix bool) []string {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	if !prefix {
		return keys
	}
	// A prefix that another starts sorts after it, and after every key
	// in between, which starts with it too: the last prefix kept is the
	// only one to ask.
	out := keys[:0]
	for _, k := range keys {
		if len(out) == 0 || !strings.HasPrefix(k, out[len(out)-1]) {
			out = append(out, k)
		}
	}
	return out
}

// ranges returns what w follows, in ascending key order.
func (w *Watcher) ranges() []keyRange {
	var rs []keyRange
	for _, k := range Followed(w.Keys, w.Prefix) {
		r := keyRange{key: k}
		if w.Prefix {
			r.end = clientv3.GetPrefixRangeEnd(k)
			if k == "" {
				r.key = "\x00" // every key; etcd refuses an empty one (as WithPrefix does)
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// name names what w follows in messages: "/a/", or "/a/" "/b/".
func (w *Watcher) name() string {
	var q []string
	for _, k := range Followed(w.Keys, w.Prefix) {
		q = append(q, strconv.Quote(k))
	}
	return strings.Join(q, " ")
}

// Run lists, then watches, putting batches into out, until ctx ends. The
// first batch is the initial listing (Cause CauseInitial, Synced); full
// listings after a compaction are CauseResync; every etcd revision seen by
// the watch is one CauseChange batch. Run returns ctx.Err(), or an error
// when etcd refuses the request for good (permission denied, bad
// credentials, an invalid request); it closes nothing: out belongs to the
// caller.
func (w *Watcher) Run(ctx context.Context, out flow.Sink) error {
	defer w.report()()
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
		w.current(time.Now(), w.peer)
		out.Put(flow.Batch{Changes: changes, Cause: cause, Synced: true, Rev: rev, Confirmed: true})
		cause = flow.CauseResync
		if err := w.watch(ctx, rev, out); err != nil {
			return err
		}
		// The history after rev is gone: list again.
	}
}

// report sets up what tells of the losses of a Run or a List, and
// returns what ends it.
func (w *Watcher) report() (end func()) {
	w.peer = strings.Join(w.Client.Endpoints(), ",")
	if w.outage != nil {
		return func() {} // Source's, which ends it
	}
	w.outage = &dial.Outage{Server: "etcd", Endpoints: w.peer, Logf: w.Logf, Debugf: w.Debugf}
	return func() {
		w.outage.Stop()
		w.outage = nil
	}
}

func (w *Watcher) restarted(compacted bool) {
	if w.OnRestart != nil {
		w.OnRestart(compacted)
	}
}
