package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// recorded is a source that puts recorded batches, then waits for the end
// of the run, or fails with err if it is set.
type recorded struct {
	batches []flow.Batch
	err     error
	puts    chan flow.Batch // if set, later batches come from here
	// ended, if set, is closed when Run returns: when the run's context
	// ends. While the run is blocked in a write, only its Timeout can end
	// it, so tests learn from ended that the timeout has passed.
	ended chan struct{}
}

func (s *recorded) Run(ctx context.Context, out flow.Sink) error {
	if s.ended != nil {
		defer close(s.ended)
	}
	for _, b := range s.batches {
		out.Put(b)
	}
	if s.err != nil {
		return s.err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-s.puts:
			out.Put(b)
		}
	}
}

func obj(v int) map[string]any { return map[string]any{"v": v} }

func put(id string, v int) flow.Change { return flow.Change{ID: id, Object: obj(v)} }
func del(id string) flow.Change        { return flow.Change{ID: id, Deleted: true} }

func initial(c ...flow.Change) flow.Batch {
	return flow.Batch{Cause: flow.CauseInitial, Synced: true, Changes: c}
}

func change(c ...flow.Change) flow.Batch {
	return flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: c}
}

func compile(t *testing.T, flag, expr string) *jq.Program {
	t.Helper()
	p, err := jq.Compile(flag, expr, jq.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// short renders NDJSON lines as "type id" and "done N cause" for
// comparison.
func short(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var typ, id, cause string
		var batch int
		fmt.Sscanf(l, `{"type":"%s`, &typ)
		typ, _, _ = strings.Cut(typ, `"`)
		if typ == "batch_done" {
			i := strings.Index(l, `"batch":`)
			fmt.Sscanf(l[i:], `"batch":%d`, &batch)
			_, c, _ := strings.Cut(l, `"cause":"`)
			cause, _, _ = strings.Cut(c, `"`)
			lines = append(lines, fmt.Sprintf("done %d %s", batch, cause))
			continue
		}
		_, rest, _ := strings.Cut(l, `"id":"`)
		id, _, _ = strings.Cut(rest, `"`)
		lines = append(lines, typ+" "+id)
	}
	return lines
}

// runFor runs src with o into a buffer and fails the test if Run does not
// end within timeout.
func runFor(t *testing.T, ctx context.Context, src Source, w io.Writer, o Options) (Result, error) {
	t.Helper()
	type ended struct {
		res Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := Run(ctx, src, w, o)
		done <- ended{res, err}
	}()
	select {
	case e := <-done:
		return e.res, e.err
	case <-time.After(testkit.Timeout):
		t.Fatalf("Run did not end within %v", testkit.Timeout)
	}
	return Result{}, nil
}

// cancelWhen runs src with o into w, waits for ready, then cancels the
// run's context (a signal); it fails the test if Run does not end within
// timeout after that, e.g. because a blocked write kept it alive.
func cancelWhen(t *testing.T, src Source, w io.Writer, o Options, ready func()) Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		res, _ := Run(ctx, src, w, o)
		done <- res
	}()
	ready()
	cancel()
	select {
	case res := <-done:
		return res
	case <-time.After(testkit.Timeout):
		t.Fatalf("Run did not end within %v of its context's end", testkit.Timeout)
	}
	return Result{}
}

// growing calls try with a Timeout of 50ms, then ten times longer, up to
// timeout, until try says that the attempt counts. A run's Timeout starts
// with Run: on a loaded machine a short one may pass before the run has
// read its source's first batch, and an attempt where that happened says
// nothing about what the test checks. The test fails if no attempt counts.
func growing(t *testing.T, try func(d time.Duration) (counts bool)) {
	t.Helper()
	for d := 50 * time.Millisecond; ; d = min(10*d, testkit.Timeout) {
		if try(d) {
			return
		}
		if d == testkit.Timeout {
			t.Fatalf("no attempt counted, the last one with a Timeout of %v", d)
		}
		t.Logf("a Timeout of %v passed too early on this machine; trying a longer one", d)
	}
}

// TestGoals: each goal ends the run where it is met, with what was printed
// up to there.
func TestGoals(t *testing.T) {
	batches := []flow.Batch{
		initial(put("a", 1), put("b", 2)),
		change(put("a", 3)),
		change(put("c", 4), del("b")),
		change(put("d", 5)),
	}
	tests := []struct {
		name string
		o    func(t *testing.T) Options
		want []string
		res  Result
	}{{
		name: "once: the initial state",
		o:    func(*testing.T) Options { return Options{Once: true} },
		want: []string{"new a", "new b", "done 1 initial"},
		res:  Result{Stop: GoalMet, Received: true, Events: 2, Batches: 1},
	}, {
		name: "count: stops at the N-th event, mid-batch",
		o:    func(*testing.T) Options { return Options{Count: 4} },
		want: []string{"new a", "new b", "done 1 initial", "updated a", "done 2 change", "deleted b"},
		res:  Result{Stop: GoalMet, Received: true, Events: 4, Batches: 2},
	}, {
		name: "until over the list: after the batch where it holds",
		o: func(t *testing.T) Options {
			return Options{List: true, Until: compile(t, "--until", "any(.[]; .v == 4)")}
		},
		want: []string{"new a", "new b", "done 1 initial", "updated a", "done 2 change", "deleted b", "new c", "done 3 change"},
		res:  Result{Stop: GoalMet, Received: true, Events: 5, Batches: 3},
	}, {
		name: "until over one object",
		o: func(t *testing.T) Options {
			return Options{Until: compile(t, "--until", ".v == 3")}
		},
		want: []string{"new a", "new b", "done 1 initial", "updated a", "done 2 change"},
		res:  Result{Stop: GoalMet, Received: true, Events: 3, Batches: 2},
	}, {
		name: "changes only: batch 1 is the first change; count counts printed events",
		o:    func(*testing.T) Options { return Options{ChangesOnly: true, Count: 2} },
		want: []string{"updated a", "done 1 change", "deleted b"},
		res:  Result{Stop: GoalMet, Received: true, Events: 2, Batches: 1},
	}, {
		name: "filter: an object that stops matching is deleted",
		o: func(t *testing.T) Options {
			return Options{Filter: compile(t, "--filter", ".v % 2 == 1"), Count: 3}
		},
		want: []string{"new a", "done 1 initial", "updated a", "done 2 change", "new d"},
		res:  Result{Stop: GoalMet, Received: true, Events: 3, Batches: 2},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := runFor(t, context.Background(), &recorded{batches: batches}, &out, tt.o(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, short(out.String())); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.res, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStops: every other way a run ends.
func TestStops(t *testing.T) {
	boom := errors.New("boom")
	t.Run("timeout with no goal", func(t *testing.T) {
		growing(t, func(d time.Duration) bool {
			var out bytes.Buffer
			res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, &out, Options{Timeout: d})
			if err != nil || res.Stop != TimedOut || res.GoalUnmet {
				t.Fatalf("Run = %+v, %v; want timed out, no goal", res, err)
			}
			if !res.Received {
				return false // the timeout passed before the first batch was read
			}
			if got := short(out.String()); len(got) != 2 {
				t.Errorf("printed %q, want the initial state", got)
			}
			return true
		})
	})
	t.Run("timeout with a goal unmet", func(t *testing.T) {
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, io.Discard, Options{Timeout: 50 * time.Millisecond, Count: 5})
		if err != nil || res.Stop != TimedOut || !res.GoalUnmet {
			t.Fatalf("Run = %+v, %v; want timed out with the --count goal", res, err)
		}
	})
	t.Run("timeout before the source delivered anything", func(t *testing.T) {
		res, err := runFor(t, context.Background(), &recorded{}, io.Discard, Options{Timeout: 50 * time.Millisecond, Once: true})
		if err != nil || res.Stop != TimedOut || res.Received {
			t.Fatalf("Run = %+v, %v; want timed out, nothing received", res, err)
		}
	})
	t.Run("interrupted: what was printed is out", func(t *testing.T) {
		src := &recorded{puts: make(chan flow.Batch)}
		w := &lines{seen: make(chan string, 10)}
		res := cancelWhen(t, src, w, Options{}, func() {
			src.puts <- initial(put("a", 1))
			w.await(t, `"batch_done"`)
		})
		if res.Stop != Interrupted {
			t.Fatalf("Stop = %v, want interrupted", res.Stop)
		}
	})
	t.Run("source failure: queued batches first", func(t *testing.T) {
		var out bytes.Buffer
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1)), change(put("b", 2))}, err: boom}, &out, Options{})
		if !errors.Is(err, boom) || res.Stop != Failed {
			t.Fatalf("Run = %+v, %v; want failed with boom", res, err)
		}
		if diff := cmp.Diff([]string{"new a", "done 1 initial", "new b", "done 2 change"}, short(out.String())); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	})
	t.Run("output closed while writing", func(t *testing.T) {
		pr, pw := io.Pipe()
		pr.Close()
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, pw, Options{})
		if err != nil || res.Stop != OutputClosed {
			t.Fatalf("Run = %+v, %v; want output closed", res, err)
		}
	})
	t.Run("output closed with EPIPE", func(t *testing.T) {
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, failing{syscall.EPIPE}, Options{})
		if err != nil || res.Stop != OutputClosed {
			t.Fatalf("Run = %+v, %v; want output closed", res, err)
		}
	})
	t.Run("output closed while idle", func(t *testing.T) {
		hung := make(chan struct{})
		o := Options{Hangup: func(ctx context.Context) bool {
			select {
			case <-hung:
				return true
			case <-ctx.Done():
				return false
			}
		}}
		w := &lines{seen: make(chan string, 10)}
		done := make(chan Result, 1)
		go func() {
			res, _ := Run(context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, w, o)
			done <- res
		}()
		w.await(t, `"batch_done"`)
		close(hung)
		select {
		case res := <-done:
			if res.Stop != OutputClosed {
				t.Fatalf("Stop = %v, want output closed", res.Stop)
			}
		case <-time.After(testkit.Timeout):
			t.Fatal("Run did not end on hangup")
		}
	})
	t.Run("output error", func(t *testing.T) {
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, failing{boom}, Options{})
		if !errors.Is(err, boom) || res.Stop != Failed {
			t.Fatalf("Run = %+v, %v; want failed with boom", res, err)
		}
	})
	t.Run("strict: an evaluation error fails the run", func(t *testing.T) {
		o := Options{Strict: true, Filter: compile(t, "--filter", ".v.x")}
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, io.Discard, o)
		if err == nil || !strings.Contains(err.Error(), `"a": --filter: expected an object`) || res.Stop != Failed {
			t.Fatalf("Run = %+v, %v; want failed naming the id and the flag", res, err)
		}
	})
	t.Run("not strict: an evaluation error is a warning and no match", func(t *testing.T) {
		var warnings []string
		o := Options{Filter: compile(t, "--filter", ".v.x"), Once: true,
			Logf: func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }}
		var out bytes.Buffer
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}}, &out, o)
		if err != nil || res.Stop != GoalMet || res.Events != 0 {
			t.Fatalf("Run = %+v, %v; want the goal met with nothing printed", res, err)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], `warning: "a": --filter`) {
			t.Errorf("warnings %q", warnings)
		}
	})
}

// TestRaces: stop causes that meet.
func TestRaces(t *testing.T) {
	t.Run("count met, timeout passes while the last lines are written", func(t *testing.T) {
		// The first write is the flush of the lines that met the goal;
		// the writer holds it until the timeout has passed.
		growing(t, func(d time.Duration) bool {
			src := &recorded{batches: []flow.Batch{initial(put("a", 1), put("b", 2))}, ended: make(chan struct{})}
			w := &blocked{release: src.ended, ended: src.ended}
			res, err := runFor(t, context.Background(), src, w, Options{Count: 2, Timeout: d, WriteGrace: testkit.Timeout})
			if !w.early.Load() {
				return false // the timeout passed before the goal was met
			}
			if err != nil || res.Stop != GoalMet {
				t.Fatalf("Run = %+v, %v; want the goal met", res, err)
			}
			return true
		})
	})
	t.Run("a goal met in the batch before the source fails", func(t *testing.T) {
		res, err := runFor(t, context.Background(), &recorded{batches: []flow.Batch{initial(put("a", 1))}, err: errors.New("boom")}, io.Discard, Options{Once: true})
		if err != nil || res.Stop != GoalMet {
			t.Fatalf("Run = %+v, %v; want the goal met", res, err)
		}
	})
	t.Run("signal while a write is blocked", func(t *testing.T) {
		w := &blocked{started: make(chan struct{}), release: make(chan struct{})}
		defer close(w.release)
		res := cancelWhen(t, &recorded{batches: []flow.Batch{initial(put("a", 1))}}, w, Options{WriteGrace: 50 * time.Millisecond}, func() { w.await(t) })
		if res.Stop != Interrupted {
			t.Fatalf("Stop = %v, want interrupted", res.Stop)
		}
	})
	t.Run("timeout while a write is blocked", func(t *testing.T) {
		growing(t, func(d time.Duration) bool {
			src := &recorded{batches: []flow.Batch{initial(put("a", 1))}, ended: make(chan struct{})}
			w := &blocked{release: make(chan struct{}), ended: src.ended}
			defer close(w.release)
			res, err := runFor(t, context.Background(), src, w, Options{WriteGrace: 50 * time.Millisecond, Timeout: d})
			if !w.early.Load() {
				return false // the timeout passed before the write began
			}
			if err != nil || res.Stop != TimedOut {
				t.Fatalf("Run = %+v, %v; want timed out", res, err)
			}
			return true
		})
	})
	t.Run("a slow filter over a large listing stops with the run", func(t *testing.T) {
		var big []flow.Change
		for i := range 2000 {
			big = append(big, put(fmt.Sprintf("id-%04d", i), i))
		}
		// Some 10 ms an object: 20 s for the listing, unless cancelled.
		o := Options{Filter: compile(t, "--filter", "[range(200000)] | length > 0")}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(testkit.Quiet, cancel)
		start := time.Now()
		res, err := runFor(t, ctx, &recorded{batches: []flow.Batch{initial(big...)}}, io.Discard, o)
		if err != nil || res.Stop != Interrupted {
			t.Fatalf("Run = %+v, %v; want interrupted", res, err)
		}
		t.Logf("ended %v after the start", time.Since(start))
	})
}

// lines is a writer that reports every line written to it.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			break
		}
		l.seen <- line
	}
	return len(p), nil
}

// await waits for a line containing s.
func (l *lines) await(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(testkit.Timeout)
	for {
		select {
		case line := <-l.seen:
			if strings.Contains(line, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no line with %q within %v", s, testkit.Timeout)
		}
	}
}

// failing fails every write with err.
type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }

// blocked is a reader that stopped reading: every write blocks until
// release is closed.
type blocked struct {
	once    sync.Once
	started chan struct{} // if set, closed at the first write
	release chan struct{}
	// ended, if set, is the source's (see recorded); early says whether
	// the first write began before it was closed, that is before the
	// run's timeout passed.
	ended <-chan struct{}
	early atomic.Bool
}

func (b *blocked) Write(p []byte) (int, error) {
	b.once.Do(func() {
		if b.ended != nil {
			select {
			case <-b.ended:
			default:
				b.early.Store(true)
			}
		}
		if b.started != nil {
			close(b.started)
		}
	})
	<-b.release
	return len(p), nil
}

// await waits for the first write.
func (b *blocked) await(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(testkit.Timeout):
		t.Fatalf("no write within %v", testkit.Timeout)
	}
}
