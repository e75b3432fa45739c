package watch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit/replay"
)

// memState is a Recorder that keeps the view in memory, as state.Store
// keeps it in its file.
type memState struct {
	mu    sync.Mutex
	view  map[string][]byte
	batch int
}

func (m *memState) MarkInFlight([]flow.Event) error { return nil }

func (m *memState) Record(batch int, rev int64, events []flow.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if batch < m.batch {
		return fmt.Errorf("batch %d recorded after %d", batch, m.batch)
	}
	for _, ev := range events {
		if ev.Type == flow.Deleted {
			delete(m.view, ev.ID)
		} else {
			m.view[ev.ID] = ev.Object.(*jsondoc.Doc).JSON()
		}
	}
	m.batch = batch
	return nil
}

func (m *memState) resume() *Resume {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &Resume{Batch: m.batch}
	for id, b := range m.view {
		r.View = append(r.View, flow.Change{ID: id, Object: jsondoc.New(b)})
	}
	return r
}

// execModel drives a run with Exec whose handler fails at random, from a
// source that changes at random while the handler runs, and checks the
// deliveries against a model of the source: replayed, the handler's
// inputs follow every rule of the stream and end equal to the source;
// the recorded state equals the replay; a failed input is given again,
// merged. Then a second run resumes from the recorded state.
func execModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	fails := rand.New(rand.NewPCG(seed, 1)) // the handler's, under mu
	ids := []string{"a", "b", "c", "d", "e"}
	model := map[string]string{}
	v := 0
	randomBatch := func(full bool) flow.Batch {
		if full {
			b := flow.Batch{Cause: flow.CauseResync, Synced: true}
			clear(model)
			for _, id := range ids {
				if rng.IntN(2) == 0 {
					v++
					model[id] = fmt.Sprintf(`{"v":%d}`, v)
					b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(model[id]))})
				}
			}
			return b
		}
		b := flow.Batch{Cause: flow.CauseChange, Synced: true}
		for range 1 + rng.IntN(3) {
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(3) == 0 {
				delete(model, id)
				b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true})
				continue
			}
			if rng.IntN(4) > 0 { // else re-put the same state
				v++
				model[id] = fmt.Sprintf(`{"v":%d}`, v)
			}
			if s, ok := model[id]; ok {
				b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(s))})
			}
		}
		return b
	}

	var (
		mu       sync.Mutex
		checker  replay.Checker
		failed   []string // the ids of the last failed input
		attempts int
	)
	st := &memState{view: map[string][]byte{}}
	handle := func(ctx context.Context, input []byte, done flow.Event, attempt int) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		var got []string
		sc := bufio.NewScanner(bytes.NewReader(input))
		var lines [][]byte
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			lines = append(lines, line)
			if i := bytes.Index(line, []byte(`"id":"`)); i >= 0 {
				got = append(got, string(line[i+6:i+7]))
			}
		}
		if attempt > 1 && failed == nil {
			return fmt.Errorf("attempt %d, but no attempt failed", attempt)
		}
		if attempt == 1 && failed != nil {
			return fmt.Errorf("attempt 1 after a failed attempt")
		}
		// A retry gets every id of the failed input again (the failed
		// run may have taken any of it), merged with what came since.
		checker.Again = map[string]bool{}
		for _, id := range failed {
			checker.Again[id] = true
			if !slices.Contains(got, id) {
				t.Errorf("seed %d: attempt %d lacks %s, which the failed attempt had", seed, attempt, id)
			}
		}
		if fails.IntN(3) == 0 {
			failed = append(failed, got...)
			return errors.New("handler failed")
		}
		failed = nil
		for _, line := range lines {
			if err := checker.Line(line); err != nil {
				t.Errorf("seed %d: %v", seed, err)
				return nil
			}
		}
		if done.Batch != checker.Batches() {
			t.Errorf("seed %d: env says batch %d, stream %d", seed, done.Batch, checker.Batches())
		}
		return nil
	}
	want := func() map[string]any {
		w := map[string]any{}
		for id, s := range model {
			w[id] = s
		}
		return w
	}

	runPart := func(resume *Resume, first flow.Batch, n int) {
		puts := make(chan flow.Batch)
		src := &recorded{batches: []flow.Batch{first}, puts: puts}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ended := make(chan error, 1)
		go func() {
			_, err := Run(ctx, src, &bytes.Buffer{}, Options{Exec: handle, ExecRetries: 1000, ExecBackoffMax: time.Millisecond, State: st, Resume: resume})
			ended <- err
		}()
		for range n {
			b := randomBatch(rng.IntN(20) == 0)
			puts <- b
			if rng.IntN(4) == 0 {
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			diff := checker.Equal(want())
			mu.Unlock()
			if diff == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: the handler's view does not reach the source's:\n%s", seed, diff)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-ended; err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.batch != checker.Batches() {
			t.Fatalf("seed %d: recorded batch %d, delivered %d", seed, st.batch, checker.Batches())
		}
		for id, b := range st.view {
			if model[id] != string(b) {
				t.Fatalf("seed %d: recorded %s: %s, source has %q", seed, id, b, model[id])
			}
		}
		if len(st.view) != len(model) {
			t.Fatalf("seed %d: recorded %d objects, source has %d", seed, len(st.view), len(model))
		}
	}
	first := randomBatch(true)
	first.Cause = flow.CauseInitial
	runPart(nil, first, 50+rng.IntN(100))
	// Changes while nothing runs, then a run that resumes.
	for range rng.IntN(5) {
		randomBatch(false)
	}
	listing := flow.Batch{Cause: flow.CauseInitial, Synced: true}
	for _, id := range ids {
		if s, ok := model[id]; ok {
			listing.Changes = append(listing.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(s))})
		}
	}
	runPart(st.resume(), listing, 50+rng.IntN(100))
	if attempts == checker.Batches() {
		t.Logf("seed %d: no handler run failed", seed)
	}
}

func TestExecModel(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := range uint64(seeds) {
		execModel(t, seed)
		if t.Failed() {
			return
		}
	}
}

// TestExecMergesWhileHandlerRuns: a handler that is slow gets the latest
// state of each id, not every state in between, and one run per wait.
func TestExecMergesWhileHandlerRuns(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	var inputs []string
	var mu sync.Mutex
	handle := func(ctx context.Context, input []byte, done flow.Event, attempt int) error {
		mu.Lock()
		inputs = append(inputs, strings.TrimSpace(strings.Join(short(string(input)), "; ")))
		n := len(inputs)
		mu.Unlock()
		if n == 1 {
			close(started)
			<-release
		}
		return nil
	}
	puts := make(chan flow.Batch)
	src := &recorded{batches: []flow.Batch{initial(put("a", 1), put("b", 1))}, puts: puts}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		Run(ctx, src, &bytes.Buffer{}, Options{Exec: handle})
	}()
	<-started
	// The first run holds; a hundred updates, a deletion, and an object
	// that comes and goes meanwhile.
	for i := 2; i <= 100; i++ {
		puts <- change(put("a", i))
	}
	puts <- change(del("b"))
	puts <- change(put("c", 1))
	puts <- change(del("c"))
	puts <- change() // once it is taken, the deletion of c is queued
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(inputs)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-ended
	want := []string{"new a; new b; done 1 initial", "updated a; deleted b; done 2 change"}
	if !slices.Equal(inputs, want) {
		t.Fatalf("handler inputs:\n%q\nwant\n%q", inputs, want)
	}
}
