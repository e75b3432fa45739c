package testkit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	notYet, gaveUp := errors.New("not yet"), errors.New("gave up")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		d     time.Duration
		tries int   // the try that is done (0: never)
		err   error // what the done try returns
		want  []error
		none  bool // want nil
	}{
		{name: "done at the third try", ctx: context.Background(), d: Timeout, tries: 3, none: true},
		{name: "gives up", ctx: context.Background(), d: Timeout, tries: 2, err: gaveUp, want: []error{gaveUp}},
		{name: "not within d", ctx: context.Background(), d: 20 * time.Millisecond, want: []error{notYet}},
		{name: "ctx ended", ctx: cancelled, d: Timeout, want: []error{notYet, context.Canceled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := Poll(tc.ctx, tc.d, func() (bool, error) {
				n++
				if n == tc.tries {
					return true, tc.err
				}
				return false, notYet
			})
			if tc.none != (err == nil) {
				t.Fatalf("Poll = %v", err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("Poll = %v, want it to wrap %v", err, w)
				}
			}
		})
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	go func() { ch <- 7 }()
	if got := Receive(t, ch, "seven"); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
}

func TestBuffer(t *testing.T) {
	var all Buffer
	tail := Buffer{Max: 4}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			all.Logf("line %d", 1)
			tail.Write([]byte("abc"))
		})
	}
	wg.Wait()
	if got := all.String(); strings.Count(got, "line 1\n") != 10 || all.Len() != len(got) {
		t.Errorf("all = %q", got)
	}
	if got := string(tail.Bytes()); got != "cabc" {
		t.Errorf("tail = %q, want the last 4 bytes", got)
	}
}
