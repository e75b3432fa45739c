package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNext(t *testing.T) {
	b := Backoff{Max: time.Second}
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, b.Next())
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	b.Reset()
	if d := b.Next(); d != Initial {
		t.Errorf("after Reset: %v, want %v", d, Initial)
	}
	var zero Backoff
	for i := 0; i < 10; i++ {
		zero.Next()
	}
	if d := zero.Next(); d != DefaultMax {
		t.Errorf("zero value capped at %v, want %v", d, DefaultMax)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v", err)
	}
}
