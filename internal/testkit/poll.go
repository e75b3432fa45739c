package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// pollMax is the longest pause between two tries of Poll.
const pollMax = 100 * time.Millisecond

// Poll calls try until it reports done, for up to d or until ctx ends:
// at once, then after a millisecond, and after pauses twice as long each
// time, up to 100ms. try returns done and, if it is not done, why not yet
// (err, or nil); done with an error gives up at once.
//
// Poll returns nil once try is done with no error; try's error if it gave
// up; else, when d passes or ctx ends, an error that says so and wraps
// try's last one (errors.Is finds it, and ctx's error if ctx ended).
func Poll(ctx context.Context, d time.Duration, try func() (done bool, err error)) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for pause := time.Millisecond; ; pause = min(2*pause, pollMax) {
		done, err := try()
		if done {
			return err
		}
		select {
		case <-time.After(pause):
		case <-deadline.C:
			return notWithin(d, err)
		case <-ctx.Done():
			if err == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
}

func notWithin(d time.Duration, err error) error {
	if err == nil {
		return fmt.Errorf("not within %v", d)
	}
	return fmt.Errorf("not within %v: %w", d, err)
}

// Eventually waits, polling as Poll does, until cond returns nil, which
// says that the state the test waits for holds; an error says why it does
// not yet. The test fails with cond's last error if the state does not
// hold within Timeout. cond runs on the caller's goroutine: it may fail
// the test itself, e.g. when a process it waits on has ended.
func Eventually(t testing.TB, cond func() error) {
	t.Helper()
	if err := Poll(context.Background(), Timeout, func() (bool, error) {
		err := cond()
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
}

// Receive returns the next value on ch, for a test that waits for what a
// goroutine it started returns. The test fails, saying "no WHAT within
// Timeout", if none comes within Timeout.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("no %s within %v", what, Timeout)
	}
	var zero T
	return zero // not reached: Fatalf ends the test's goroutine
}
