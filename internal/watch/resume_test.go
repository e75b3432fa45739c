package watch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/state"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// The points of a delivery at which resumeModel kills a run: at the
// mark in flight; as the consumer (a handler, or the reader of stdout)
// has taken none of the batch, part of it, or all of it; at the record,
// before it is written; right after it.
var killPoints = []string{"mark", "none", "part", "all", "record", "recorded"}

var errKilled = errors.New("killed")

// given is a state given in a delivery, as the consumer may hold it.
type given struct {
	state   string
	deleted bool
}

// resumeModel is one seed of TestResumeModel: a consumer fed by runs of
// one --state file, each killed at a point of a delivery, with changes
// while nothing runs that revert what the killed delivery gave.
type resumeModel struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand // the test goroutine's
	cut    *rand.Rand // take's, under mu
	exec   bool
	source map[string]string // the source: id → JSON
	v      int

	mu    sync.Mutex
	world map[string]string // what the consumer took: id → JSON
	// resumed: the events of the first batch the consumer takes once
	// capture is set (of cause resume, or initial if nothing was
	// recorded).
	resumed []lineEvent
	capture bool
	// given: the ids of the last delivery the consumer was given.
	given []string
	// flight models what the file has in flight: id → the state given
	// (an object's JSON, or a deletion's prev), and whether a deletion.
	flight map[string]given

	// The kill, armed at the at-th mark in flight.
	point       string
	at, marks   int
	armed, dead bool
	cancel      context.CancelFunc
	killed      chan struct{}
	consumed    chan string // each batch_done's cause
}

// lineEvent is an event as the consumer reads it.
type lineEvent struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Object json.RawMessage `json:"object"`
	Prev   json.RawMessage `json:"prev"`
	Cause  string          `json:"cause"`
}

// take is the consumer, given one delivery: a handler's input or a write
// to stdout. In the armed delivery it takes none, part or all of it, as
// the point says, and is killed.
func (m *resumeModel) take(input []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return errKilled
	}
	var lines []lineEvent
	sc := bufio.NewScanner(bytes.NewReader(input))
	for sc.Scan() {
		var ev lineEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			m.t.Errorf("seed %d: line %s: %v", m.seed, sc.Bytes(), err)
			return err
		}
		lines = append(lines, ev)
	}
	m.given = m.given[:0]
	for _, ev := range lines {
		if ev.Type != "batch_done" {
			m.given = append(m.given, ev.ID)
		}
	}
	n, kill := len(lines), false
	if m.armed {
		switch m.point {
		case "none":
			n, kill = 0, true
		case "part":
			n, kill = m.cut.IntN(len(lines)), true
		case "all":
			kill = true
		}
	}
	for _, ev := range lines[:n] {
		switch ev.Type {
		case "new", "updated":
			m.world[ev.ID] = compact(ev.Object)
		case "deleted":
			delete(m.world, ev.ID)
		case "batch_done":
			if m.capture {
				m.resumed, m.capture = lines[:n], false
			}
			if !kill {
				m.consumed <- ev.Cause
			}
		}
	}
	if kill {
		m.killLocked()
		return errKilled
	}
	return nil
}

func (m *resumeModel) Write(p []byte) (int, error) {
	if err := m.take(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (m *resumeModel) handle(_ context.Context, input []byte, _ flow.Event, _ int) error {
	return m.take(input)
}

func (m *resumeModel) killLocked() {
	m.dead = true
	m.cancel()
	close(m.killed)
}

// killable is a state file that dies with the run.
type killable struct {
	st *state.Store
	m  *resumeModel
}

func (k *killable) MarkInFlight(evs []flow.Event) error {
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return errKilled
	}
	m.marks++
	if m.marks == m.at {
		m.armed = true
		if m.point == "mark" {
			m.killLocked()
			return errKilled
		}
	}
	if err := k.st.MarkInFlight(evs); err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Type == flow.Deleted {
			m.flight[ev.ID] = given{compact(ev.Prev.(*jsondoc.Doc).JSON()), true}
		} else {
			m.flight[ev.ID] = given{compact(ev.Object.(*jsondoc.Doc).JSON()), false}
		}
	}
	return nil
}

func (k *killable) Record(batch int, rev int64, evs []flow.Event) error {
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return errKilled
	}
	if m.armed && m.point == "record" {
		m.killLocked()
		return errKilled
	}
	err := k.st.Record(batch, rev, evs)
	if err == nil {
		for _, ev := range evs {
			delete(m.flight, ev.ID)
		}
	}
	if m.armed && m.point == "recorded" {
		m.killLocked()
		return errKilled
	}
	return err
}

func compact(j []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, j); err != nil {
		return string(j)
	}
	return b.String()
}

var resumeIDs = []string{"a", "b", "c", "d", "e", "f"}

// change changes 1 to 3 ids of the source, each to a new state or away:
// a batch that always has something to deliver.
func (m *resumeModel) change() flow.Batch {
	b := flow.Batch{Cause: flow.CauseChange, Synced: true}
	for _, i := range m.rng.Perm(len(resumeIDs))[:1+m.rng.IntN(3)] {
		id := resumeIDs[i]
		if _, ok := m.source[id]; ok && m.rng.IntN(3) == 0 {
			delete(m.source, id)
			b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true})
			continue
		}
		m.v++
		m.source[id] = fmt.Sprintf(`{"v":%d}`, m.v)
		b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(m.source[id]))})
	}
	return b
}

func (m *resumeModel) listing() flow.Batch {
	b := flow.Batch{Cause: flow.CauseInitial, Synced: true}
	for _, id := range slices.Sorted(maps.Keys(m.source)) {
		b.Changes = append(b.Changes, flow.Change{ID: id, Object: jsondoc.New([]byte(m.source[id]))})
	}
	return b
}

// run runs once over the state file at path until it is killed at
// point, in the at-th delivery; or, with point "", until the consumer
// took the first batch (of cause resume, if the file had one), then
// ends it.
func (m *resumeModel) run(path string, point string, at int) {
	t := m.t
	st, err := state.Open(path, []state.Field{{Name: "command", Value: "model"}})
	if err != nil {
		t.Fatalf("seed %d: %v", m.seed, err)
	}
	defer st.Close()
	o := Options{State: &killable{st: st, m: m}}
	if st.Resumed() {
		view, err := st.View()
		if err != nil {
			t.Fatal(err)
		}
		inflight, err := st.InFlight()
		if err != nil {
			t.Fatal(err)
		}
		o.Resume = &Resume{View: view, InFlight: inflight, Batch: st.Batch()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.mu.Lock()
	m.point, m.at, m.marks, m.armed, m.dead = point, at, 0, false, false
	m.cancel, m.killed, m.consumed = cancel, make(chan struct{}), make(chan string, 100)
	m.mu.Unlock()
	if m.exec {
		o.Exec, o.ExecRetries = m.handle, 1000
	}
	puts := make(chan flow.Batch)
	ended := make(chan struct{})
	src := &recorded{batches: []flow.Batch{m.listing()}, puts: puts}
	go func() {
		defer close(ended)
		var w bytes.Buffer
		if m.exec {
			Run(ctx, src, &w, o)
		} else {
			Run(ctx, src, m, o)
		}
	}()
	defer func() { cancel(); <-ended }()
	if point == "" {
		<-m.consumed
		return
	}
	// A batch at a time, each once the consumer has the source's state
	// (a batch may merge with the one before into nothing at all).
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatalf("seed %d: no kill in 30 batches", m.seed)
		}
		select {
		case puts <- m.change():
		case <-m.killed:
			return
		}
		for {
			m.mu.Lock()
			diff := mapDiff(m.world, m.source)
			m.mu.Unlock()
			if diff == "" {
				break
			}
			select {
			case <-m.consumed:
			case <-m.killed:
				return
			case <-time.After(testkit.Timeout):
				t.Fatalf("seed %d: the consumer did not reach the source in %v (point %q at %d):\n%s", m.seed, testkit.Timeout, m.point, m.at, diff)
			}
		}
	}
}

func resumeModelSeed(t *testing.T, seed uint64, exec bool) {
	m := &resumeModel{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 7)), cut: rand.New(rand.NewPCG(seed, 8)),
		exec: exec, source: map[string]string{}, world: map[string]string{}, flight: map[string]given{}}
	path := filepath.Join(t.TempDir(), "state")
	for range 1 + m.rng.IntN(4) {
		m.change()
	}
	for round := range 4 {
		// A run killed at a point of its at-th delivery: the first of a
		// resumed run may deliver again what an earlier kill left.
		point := killPoints[m.rng.IntN(len(killPoints))]
		m.run(path, point, 1+m.rng.IntN(4))
		view, inflight := m.read(path)
		got := map[string]given{}
		for _, ev := range inflight {
			if ev.Type == flow.Deleted {
				got[ev.ID] = given{compact(ev.Prev.(*jsondoc.Doc).JSON()), true}
			} else {
				got[ev.ID] = given{compact(ev.Object.(*jsondoc.Doc).JSON()), false}
			}
		}
		if !maps.Equal(got, m.flight) {
			t.Fatalf("seed %d round %d (killed at %q, exec %v): in flight in the file %v, want %v", seed, round, point, exec, got, m.flight)
		}

		// While nothing runs: the ids of the last delivery go back to
		// their recorded state (most of them: the others stay as it gave
		// them, which the consumer may not have taken), and an unrelated
		// id changes.
		for _, id := range m.given {
			if m.rng.IntN(4) == 0 {
				continue
			}
			if s, ok := view[id]; ok {
				m.source[id] = s
			} else {
				delete(m.source, id)
			}
		}
		// (Where every id was given, one that is not in flight: the
		// resumed run has something to deliver, with --exec too.)
		unrelated := slices.IndexFunc(resumeIDs, func(id string) bool {
			_, ok := m.flight[id]
			return !ok && !slices.Contains(m.given, id)
		})
		if unrelated < 0 {
			unrelated = slices.IndexFunc(resumeIDs, func(id string) bool { _, ok := m.flight[id]; return !ok })
		}
		if unrelated >= 0 {
			m.v++
			m.source[resumeIDs[unrelated]] = fmt.Sprintf(`{"v":%d}`, m.v)
		}
		if m.rng.IntN(3) == 0 {
			continue // the next run resumes, and is killed too
		}

		// The run that resumes delivers what it had in flight, and
		// what changed meanwhile; nothing else.
		m.resumed, m.capture = nil, true
		m.run(path, "", 0)
		if diff := mapDiff(m.world, m.source); diff != "" {
			t.Fatalf("seed %d round %d (killed at %q, exec %v): after the resumed batch, the consumer's world is not the source's:\n%s", seed, round, point, exec, diff)
		}
		want := map[string]bool{}
		for id := range got {
			want[id] = true
		}
		for _, id := range resumeIDs {
			if m.source[id] != view[id] {
				want[id] = true
			}
		}
		delivered := map[string]bool{}
		for _, ev := range m.resumed {
			if ev.Type == "batch_done" {
				continue
			}
			delivered[ev.ID] = true
			g, inFlight := got[ev.ID]
			if inFlight && ev.Type != "new" && compact(ev.Prev) != g.state {
				t.Errorf("seed %d round %d: %s %s delivered again with prev %s, want %s, the state given", seed, round, ev.Type, ev.ID, ev.Prev, g.state)
			}
		}
		if !maps.Equal(delivered, want) {
			t.Fatalf("seed %d round %d (killed at %q, exec %v): the resumed batch has %v, want %v (in flight %v)", seed, round, point, exec, slices.Sorted(maps.Keys(delivered)), slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
		}
		if len(m.flight) > 0 {
			t.Fatalf("seed %d round %d: still in flight after the resumed batch was recorded: %v", seed, round, m.flight)
		}
		for range m.rng.IntN(3) {
			m.change()
		}
	}
}

// read reads the view and what is in flight from the file at path.
func (m *resumeModel) read(path string) (map[string]string, []flow.Event) {
	st, err := state.Open(path, []state.Field{{Name: "command", Value: "model"}})
	if err != nil {
		m.t.Fatal(err)
	}
	defer st.Close()
	view := map[string]string{}
	changes, err := st.View()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, c := range changes {
		view[c.ID] = compact(c.Object.(*jsondoc.Doc).JSON())
	}
	inflight, err := st.InFlight()
	if err != nil {
		m.t.Fatal(err)
	}
	return view, inflight
}

func mapDiff(got, want map[string]string) string {
	var d string
	for _, id := range resumeIDs {
		if got[id] != want[id] {
			d += fmt.Sprintf("%s: consumer %q, source %q\n", id, got[id], want[id])
		}
	}
	return d
}

// TestResumeModel: runs with --state, with and without --exec, killed at
// every point of a delivery, then changes that revert the batch in
// flight while nothing runs: the run that resumes leaves the consumer
// with the source's state, and delivers again only what was in flight
// and what changed.
func TestResumeModel(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for _, exec := range []bool{false, true} {
		for seed := range uint64(seeds) {
			resumeModelSeed(t, seed, exec)
			if t.Failed() {
				return
			}
		}
	}
}
