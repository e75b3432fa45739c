package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNext: the steps double up to the cap, and every wait lies in the
// upper half of its step.
func TestNext(t *testing.T) {
	b := Backoff{Max: time.Second}
	var steps []time.Duration
	for i := 0; i < 6; i++ {
		d := b.Next()
		steps = append(steps, b.d)
		if d < b.d/2 || d > b.d {
			t.Errorf("wait %d: %v, want within [%v, %v]", i, d, b.d/2, b.d)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	b.Reset()
	if d := b.Next(); d < Initial/2 || d > Initial {
		t.Errorf("after Reset: %v, want within [%v, %v]", d, Initial/2, Initial)
	}
	var zero Backoff
	for i := 0; i < 10; i++ {
		zero.Next()
	}
	if d := zero.Next(); zero.d != DefaultMax || d < DefaultMax/2 || d > DefaultMax {
		t.Errorf("zero value: step %v, wait %v; want the step capped at %v", zero.d, d, DefaultMax)
	}
}

// TestNextSpread: the waits at one step are spread over it (not all
// equal, both halves of the range drawn), and every wait stays within
// [Initial/2, Max], also at the cap.
func TestNextSpread(t *testing.T) {
	const n = 200
	for _, step := range []int{0, 3, 10} { // the first wait, a middle one, one at the cap
		t.Run("", func(t *testing.T) {
			b := Backoff{Max: time.Second}
			var (
				waits  = map[time.Duration]bool{}
				lo, hi bool // a wait in the lower, the upper quarter of [d/2, d]
				d      time.Duration
			)
			for i := 0; i < n; i++ {
				b.Reset()
				for j := 0; j < step; j++ {
					b.Next()
				}
				w := b.Next()
				d = b.d
				if w < Initial/2 || w > b.Max || w < d/2 || w > d {
					t.Fatalf("wait %v at step %v, want within [%v, %v] and [%v, %v]", w, d, d/2, d, Initial/2, b.Max)
				}
				waits[w] = true
				lo = lo || w < d/2+d/8
				hi = hi || w > d-d/8
			}
			if len(waits) < n/2 || !lo || !hi {
				t.Errorf("%d waits at step %v: %d distinct, one in the lower quarter %v, in the upper %v; want them spread", n, d, len(waits), lo, hi)
			}
		})
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v", err)
	}
}
