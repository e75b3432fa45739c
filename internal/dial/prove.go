package dial

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nodewatch/nodewatch/internal/backoff"
)

// Prove keeps a stream proving that its server is alive, until ctx ends:
// the liveness loop of the etcd watcher and of the Curator client, whose
// wires prove it differently.
//
// heard holds when the stream last heard from its server (unix
// nanoseconds); the stream's reader stores to it, and so does Prove when
// ask says it got an answer. Once heard is every old (the keepalive Time,
// or less for --heartbeat), Prove calls ask about once a second, with a
// context that ends by then, until heard moves: ask sends the server a
// question on the stream's connection and reports whether the answer
// already came (etcd answers on the stream itself, so its ask reports
// false), or an error when the stream is broken (Prove returns: the
// reader says why). Once nothing was heard for k.Time + k.Timeout, Prove
// calls silent with how long, and returns.
func (k Keepalive) Prove(ctx context.Context, every time.Duration, heard *atomic.Int64, ask func(ctx context.Context) (bool, error), silent func(quiet time.Duration)) {
	k = k.OrDefaults()
	deadline := k.Time + k.Timeout
	every = min(every, k.Time)
	if every <= 0 {
		every = k.Time
	}
	for {
		last := heard.Load()
		since := time.Unix(0, last)
		if backoff.Sleep(ctx, time.Until(since.Add(every))) != nil {
			return
		}
		for heard.Load() == last {
			quiet := time.Since(since)
			if quiet >= deadline {
				silent(quiet)
				return
			}
			round := time.Now().Add(min(time.Second, deadline-quiet))
			actx, cancel := context.WithDeadline(ctx, round)
			answered, err := ask(actx)
			cancel()
			if err != nil || ctx.Err() != nil {
				return
			}
			if answered {
				heard.CompareAndSwap(last, time.Now().UnixNano())
				break
			}
			if backoff.Sleep(ctx, time.Until(round)) != nil {
				return
			}
		}
	}
}
