//go:build linux

package console

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

// waitHangup runs WaitHangup(ctx, w) in a goroutine; its answer comes on
// the channel.
func waitHangup(ctx context.Context, w *os.File) <-chan bool {
	got := make(chan bool, 1)
	go func() { got <- WaitHangup(ctx, w) }()
	return got
}

// TestWaitHangupReaderGone: a pipe's reader, or a socket's peer, going
// away is reported as a hangup, with nothing written.
func TestWaitHangupReaderGone(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		r, w := testkit.Pipe(t, false)
		got := waitHangup(t.Context(), w)
		r.Close()
		if !testkit.Receive(t, got, "answer of WaitHangup") {
			t.Fatal("WaitHangup = false, want true: the reader went away")
		}
	})
	t.Run("socket", func(t *testing.T) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		mine, peer := os.NewFile(uintptr(fds[0]), "stdout"), os.NewFile(uintptr(fds[1]), "peer")
		t.Cleanup(func() { mine.Close(); peer.Close() })
		got := waitHangup(t.Context(), mine)
		peer.Close()
		if !testkit.Receive(t, got, "answer of WaitHangup") {
			t.Fatal("WaitHangup = false, want true: the peer went away")
		}
	})
}

// TestWaitHangupEndsWithContext: the end of ctx ends the wait at once,
// with false, for a pipe and for a writer that is not one; and the pipe
// WaitHangup made for it is closed again (no descriptor is left behind).
//
// "At once" is checked against the machine: the fastest of three waits,
// each ended a while after it started, must be far shorter than a poll
// that wakes on a timer would take (200 ms, as WaitHangup once did).
func TestWaitHangupEndsWithContext(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		_, w := testkit.Pipe(t, false)
		before := openFiles(t)
		fastest := time.Hour
		for range 3 {
			ctx, cancel := context.WithCancel(t.Context())
			got := waitHangup(ctx, w)
			time.Sleep(20 * time.Millisecond) // into its poll, most likely
			start := time.Now()
			cancel()
			if testkit.Receive(t, got, "answer of WaitHangup") {
				t.Fatal("WaitHangup = true, want false: the reader is still there")
			}
			fastest = min(fastest, time.Since(start))
		}
		if fastest > 100*time.Millisecond {
			t.Fatalf("the fastest of three WaitHangup took %v to return once its context ended", fastest)
		}
		if after := openFiles(t); after != before {
			t.Fatalf("%d open files after, %d before: WaitHangup left its pipe open", after, before)
		}
	})
	t.Run("file", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithCancel(t.Context())
		got := waitHangup(ctx, f)
		cancel()
		if testkit.Receive(t, got, "answer of WaitHangup") {
			t.Fatal("WaitHangup = true for a regular file")
		}
	})
	t.Run("ended before", func(t *testing.T) {
		_, w := testkit.Pipe(t, false)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if testkit.Receive(t, waitHangup(ctx, w), "answer of WaitHangup") {
			t.Fatal("WaitHangup = true, want false")
		}
	})
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}
