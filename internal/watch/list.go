package watch

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// Lister is a source that can also read its state once, without
// watching, and hand it over page by page in ascending id order. Run uses
// it (Options.Lister) for --once (without --until), so that a large listing is printed as
// it arrives instead of being held whole: memory for one page, and the
// first line out before the last page is in.
type Lister interface {
	// List hands the state to page, one page at a time, every id once,
	// pages in ascending id order, and returns the revision of the
	// state (0 when unknown). An error from page ends it and is returned.
	List(ctx context.Context, page func([]flow.Change) error) (rev int64, err error)
}

// list is the run of --once over a Lister: it prints the initial state
// page by page, as the follower would print it whole, and ends with its
// batch_done. Each page goes through a follower of its own, so that
// nothing of an earlier page is kept.
func (r *run) list(l Lister) (Result, error) {
	silent := r.o.ChangesOnly
	var (
		counts flow.Counts
		last   string
		pages  int
	)
	listed := 0
	rev, err := l.List(r.ctx, func(page []flow.Change) error {
		r.res.Received = true
		r.received.Store(true)
		if r.o.Progress != nil {
			listed += len(page)
			r.o.Progress.Listed(listed)
		}
		// The pages' events must come out as one sorted listing: Listed
		// checks the order within a page, this across pages.
		if len(page) > 0 {
			if pages > 0 && page[0].ID <= last {
				return fmt.Errorf("listing out of order: %q after %q", page[0].ID, last)
			}
			last = page[len(page)-1].ID
			pages++
		}
		n, err := r.fol.Listed(page, func(ev flow.Event) error {
			if silent {
				return nil
			}
			return r.print(ev)
		})
		counts.New += n
		return err
	})
	if r.o.Progress != nil {
		r.o.Progress.Done()
	}
	if err == nil && !silent {
		err = r.print(flow.Event{Type: flow.BatchDone, Synced: true, Cause: flow.CauseInitial, Counts: counts, Rev: rev})
	}
	if err != nil && !errors.Is(err, errGoalMet) {
		r.enc.Flush()
		return r.end(err)
	}
	res, err := r.goalMet()
	if err == nil {
		r.hint(counts.New == 0) // once what was printed is out
	}
	return res, err
}
