package curatortest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Stream reads a Watch stream into a channel, so that tests can wait for
// an event with a timeout, or make sure none comes.
type Stream struct {
	t      *testing.T
	Events chan *apipb.WatchEvent // closed when the stream ends, after err is set
	Err    error
}

func NodesReq() *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
}

func NodeReq(id string) *apipb.WatchRequest {
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{NodeInCluster: &apipb.WatchRequest_NodeInCluster{NodeId: id}}}
}

// Watch opens a Watch stream for req on conn until the test ends.
func Watch(t *testing.T, conn *grpc.ClientConn, req *apipb.WatchRequest) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := apipb.NewCuratorClient(conn).Watch(ctx, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &Stream{t: t, Events: make(chan *apipb.WatchEvent)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.Events)
		for {
			ev, err := w.Recv()
			if err != nil {
				s.Err = err
				return
			}
			select {
			case s.Events <- ev:
			case <-ctx.Done():
				s.Err = ctx.Err()
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// Next returns the next event; the stream must not end before it.
func (s *Stream) Next() *apipb.WatchEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if !ok {
			s.t.Fatalf("stream ended: %v", s.Err)
		}
		return ev
	case <-time.After(testkit.Timeout):
		s.t.Fatalf("no event within %v", testkit.Timeout)
	}
	return nil
}

// None makes sure no event arrives for a while.
func (s *Stream) None() {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		s.t.Fatalf("stream ended: %v", s.Err)
	case <-time.After(testkit.Quiet):
	}
}

// End waits for the stream to end and returns its error; no event may come
// first.
func (s *Stream) End() error {
	s.t.Helper()
	select {
	case ev, ok := <-s.Events:
		if ok {
			s.t.Fatalf("unexpected event %v", ev)
		}
		return s.Err
	case <-time.After(testkit.Timeout):
		s.t.Fatalf("stream did not end within %v", testkit.Timeout)
	}
	return nil
}
