//go:build unix

package state

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// follows is what the files of these tests follow.
var follows = []Field{{"command", "key"}, {"prefix", "/nodes/"}, {"filter", ".state == \"UP\""}}

func doc(s string) *jsondoc.Doc { return jsondoc.New([]byte(s)) }

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, follows)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// model is what a view should hold: id → JSON.
type model map[string]string

// apply records events into s and m alike.
func (m model) apply(t *testing.T, s *Store, batch int, rev int64, events []flow.Event) {
	t.Helper()
	if err := s.Record(batch, rev, events); err != nil {
		t.Fatalf("Record(%d): %v", batch, err)
	}
	for _, ev := range events {
		switch ev.Type {
		case flow.New, flow.Updated:
			m[ev.ID] = string(ev.Object.(*jsondoc.Doc).JSON())
		case flow.Deleted:
			delete(m, ev.ID)
		}
	}
}

// checkView fails t unless s's view is m, in id order, every change at rev.
func checkView(t *testing.T, s *Store, m model, rev int64) {
	t.Helper()
	view, err := s.View()
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	var got, want []string
	for _, c := range view {
		d, ok := c.Object.(*jsondoc.Doc)
		if !ok {
			t.Fatalf("View: %q has an object of type %T", c.ID, c.Object)
		}
		if c.Deleted || c.Undecodable || c.Rev != rev {
			t.Errorf("View: %q: Deleted %v, Undecodable %v, Rev %d; want false, false, %d", c.ID, c.Deleted, c.Undecodable, c.Rev, rev)
		}
		got = append(got, c.ID+" "+string(d.JSON()))
	}
	for id, j := range m {
		want = append(want, id+" "+j)
	}
	// The view comes in id order: want is sorted, got must already be.
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("View:\n%s\nwant (in id order):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	s := open(t, path)
	if s.Resumed() || s.Batch() != 0 || s.Rev() != 0 {
		t.Fatalf("a new file: Resumed %v, Batch %d, Rev %d; want false, 0, 0", s.Resumed(), s.Batch(), s.Rev())
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	m := model{}
	checkView(t, s, m, 0)
	m.apply(t, s, 1, 10, []flow.Event{
		{Type: flow.New, ID: "/nodes/b", Object: doc(`{"id":"b","state":"UP"}`)},
		{Type: flow.New, ID: "/nodes/a", Object: doc(`{"id":"a","n":1}`)},
		{Type: flow.New, ID: "/nodes/c", Object: doc(`[1,2,{"x":null}]`)},
		{Type: flow.New, ID: "/nodes/é", Object: doc(`"unicode ✓"`)},
	})
	m.apply(t, s, 2, 12, []flow.Event{
		{Type: flow.Updated, ID: "/nodes/b", Object: doc(`{"id":"b","state":"DOWN"}`), Prev: doc(`{"id":"b","state":"UP"}`)},
		{Type: flow.Deleted, ID: "/nodes/a", Prev: doc(`{"id":"a","n":1}`)},
		{Type: flow.New, ID: "/nodes/d", Object: doc(`{}`)},
	})
	// A batch that deletes an id the view does not hold, updates one and
	// brings one back that was deleted, one whose events are not all
	// object events (BatchDone, Heartbeat are ignored).
	m.apply(t, s, 3, 15, []flow.Event{
		{Type: flow.Deleted, ID: "/nodes/zz"},
		{Type: flow.Updated, ID: "/nodes/c", Object: doc(`[1,2,3]`)},
		{Type: flow.New, ID: "/nodes/a", Object: doc(`{"id":"a","n":2}`)},
		{Type: flow.Heartbeat},
		{Type: flow.BatchDone, Batch: 3, Rev: 15},
	})
	// An empty batch (a resync that changed nothing) still moves the batch
	// number and the revision on.
	m.apply(t, s, 4, 17, nil)
	if !s.Resumed() || s.Batch() != 4 || s.Rev() != 17 {
		t.Errorf("after 4 batches: Resumed %v, Batch %d, Rev %d; want true, 4, 17", s.Resumed(), s.Batch(), s.Rev())
	}
	checkView(t, s, m, 17)

	// A batch with an object that is not a Doc is refused as a whole: the
	// view, batch and rev stay as they were.
	err := s.Record(5, 20, []flow.Event{
		{Type: flow.New, ID: "/nodes/x", Object: doc(`{"x":1}`)},
		{Type: flow.Deleted, ID: "/nodes/b"},
		{Type: flow.Updated, ID: "/nodes/c", Object: map[string]any{"x": 1}},
	})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "batch 5") {
		t.Errorf("Record of a map object: err %v, want an error naming %s and batch 5", err, path)
	}
	if s.Batch() != 4 || s.Rev() != 17 {
		t.Errorf("after a failed Record: Batch %d, Rev %d; want 4, 17", s.Batch(), s.Rev())
	}
	checkView(t, s, m, 17)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, with the same fields in another order.
	reordered := []Field{follows[2], follows[0], follows[1]}
	s, err = Open(path, reordered)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Resumed() || s.Batch() != 4 || s.Rev() != 17 {
		t.Errorf("reopened: Resumed %v, Batch %d, Rev %d; want true, 4, 17", s.Resumed(), s.Batch(), s.Rev())
	}
	checkView(t, s, m, 17)
	// The reopened file goes on from there.
	m.apply(t, s, 5, 1<<40, []flow.Event{{Type: flow.Deleted, ID: "/nodes/b"}})
	s.Close()
	s = open(t, path)
	defer s.Close()
	if s.Batch() != 5 || s.Rev() != 1<<40 {
		t.Errorf("reopened again: Batch %d, Rev %d; want 5, %d", s.Batch(), s.Rev(), int64(1<<40))
	}
	checkView(t, s, m, 1<<40)
}

// TestNewFileNotResumed: a file opened, never recorded into and closed is
// not a resumption.
func TestNewFileNotResumed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	open(t, path).Close()
	s := open(t, path)
	defer s.Close()
	if s.Resumed() || s.Batch() != 0 {
		t.Errorf("Resumed %v, Batch %d; want false, 0", s.Resumed(), s.Batch())
	}
	checkView(t, s, model{}, 0)
}

// snapshot is what a refused file must keep.
type snapshot struct {
	sum   [32]byte
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func snap(t *testing.T, path string) snapshot {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime()}
	if fi.Mode().IsRegular() {
		// A file this process cannot read is compared by the rest.
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			t.Fatal(err)
		}
		s.sum = sha256.Sum256(b)
	}
	return s
}

func (s snapshot) String() string {
	return fmt.Sprintf("sha256 %x…, %d bytes, %v, mtime %v", s.sum[:6], s.size, s.mode, s.mtime.Format(time.RFC3339Nano))
}

// unchanged fails t unless path is as before was taken.
func unchanged(t *testing.T, path string, before snapshot) {
	t.Helper()
	if after := snap(t, path); after != before {
		t.Errorf("%s changed:\nbefore %v\nafter  %v", path, before, after)
	}
}

// oldMtime sets path's mtime to a past second, so that a write in the
// same clock tick as the file's making would show.
func oldMtime(t *testing.T, path string) {
	t.Helper()
	past := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
}

// recorded makes a state file at path that follows follows, with n
// objects, and returns it closed.
func recorded(t testing.TB, path string, n int) {
	t.Helper()
	s := open(t, path)
	defer s.Close()
	fill(t, s, n)
}

// fill records n objects into s, 10,000 a batch.
func fill(t testing.TB, s *Store, n int) {
	t.Helper()
	fillWith(t, s, n, testkit.NodeJSON)
}

// fillWith records n objects object into s, 10,000 a batch.
func fillWith(t testing.TB, s *Store, n int, object string) {
	t.Helper()
	var events []flow.Event
	for i := range n {
		events = append(events, flow.Event{Type: flow.New, ID: id(i), Object: doc(object)})
		if len(events) == 10_000 || i == n-1 {
			if err := s.Record(s.Batch()+1, int64(i+1), events); err != nil {
				t.Fatal(err)
			}
			events = events[:0]
		}
	}
}

func id(i int) string { return fmt.Sprintf("/nodes/%08d", i) }

func TestMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	recorded(t, path, 3)
	oldMtime(t, path)
	before := snap(t, path)
	for _, c := range []struct {
		name    string
		follows []Field
		want    []string // in the message
	}{
		{"another value", []Field{{"command", "key"}, {"prefix", "/other/"}, follows[2]},
			[]string{`prefix is "/nodes/" there, "/other/" here`}},
		{"a field unset here", []Field{{"command", "key"}, {"prefix", "/nodes/"}},
			[]string{`filter is ".state == \"UP\"" there, unset here`}},
		{"a field unset there", append([]Field{{"rev", "7"}}, follows...),
			[]string{`rev is unset there, "7" here`}},
		{"two fields", []Field{{"command", "key"}, {"prefix", "/other/"}, {"filter", "true"}},
			[]string{`prefix is "/nodes/" there, "/other/" here`, `filter is ".state == \"UP\"" there, "true" here`}},
		{"another command: that alone", []Field{{"command", "nodes"}, {"prefix", "/nodes/"}, {"filter", "true"}},
			[]string{`it is the state of a "key" run, this is a "nodes" run`}},
		{"a space is no value", []Field{{"command", "key"}, {"prefix", "/nodes/ "}, {"filter", "true"}},
			[]string{`filter is ".state == \"UP\"" there, "true" here`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(path, c.follows)
			if err == nil {
				s.Close()
				t.Fatal("Open: no error")
			}
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("Open: %v, want ErrMismatch", err)
			}
			if strings.Contains(err.Error(), "prefix is") != strings.Contains(strings.Join(c.want, ";"), "prefix is") {
				t.Errorf("Open: %v\nlists prefix, which does not differ (or does not list it, which does)", err)
			}
			if strings.Count(err.Error(), " here") != strings.Count(strings.Join(c.want, ";"), " here") {
				t.Errorf("Open: %v\nwant exactly the differences %q", err, c.want)
			}
			for _, w := range append(c.want, path, "to start afresh, remove the file or give another one") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: %v\nwant it to say %s", err, w)
				}
			}
			unchanged(t, path, before)
		})
	}
	// The refusals left the file usable.
	s := open(t, path)
	defer s.Close()
	if s.Batch() != 1 {
		t.Errorf("Batch %d, want 1", s.Batch())
	}
}

func TestHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	s := open(t, path)
	fill(t, s, 2)
	before := snap(t, path)
	start := time.Now()
	s2, err := Open(path, follows)
	if err == nil {
		s2.Close()
		s.Close()
		t.Fatal("a second Open of a held file: no error")
	}
	if !errors.Is(err, ErrHeld) {
		t.Errorf("Open: %v, want ErrHeld", err)
	}
	// It names the file and the holder: this process, with its command
	// line.
	for _, w := range []string{path, fmt.Sprintf("(held by pid %d: %s", os.Getpid(), os.Args[0]), "one run at a time"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open: %v\nwant it to say %s", err, w)
		}
	}
	// bbolt tries every 50ms until lockWait has (nearly) passed.
	if d := time.Since(start); d < lockWait/2 || d > testkit.Timeout {
		t.Errorf("Open gave up after %v, want about lockWait (%v)", d, lockWait)
	}
	unchanged(t, path, before)
	// The refusal did not take the holder's lock away, nor spoil its view.
	if _, err := Open(path, follows); !errors.Is(err, ErrHeld) {
		t.Errorf("a third Open: %v, want ErrHeld", err)
	}
	if err := s.Record(2, 3, []flow.Event{{Type: flow.Deleted, ID: id(0)}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path)
	defer s.Close()
	checkView(t, s, model{id(1): testkit.NodeJSON}, 3)
}

// holdEnv names the file that TestHelperHold holds, in the process that
// TestHeldByAnotherProcess starts.
const holdEnv = "NODEWATCH_STATE_TEST_HOLD"

// childEnv is the environment of a process that runs this test binary
// for a test: the race detector's second at exit is not waited for.
func childEnv() []string {
	return append(os.Environ(), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// TestHelperHold is not a test: in a process started by
// TestHeldByAnotherProcess, it opens the file, says "held" and holds it
// until its stdin ends.
func TestHelperHold(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("a helper of TestHeldByAnotherProcess")
	}
	s, err := Open(path, follows)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("held")
	bufio.NewReader(os.Stdin).ReadString('\n')
	s.Close()
	os.Exit(0)
}

func TestHeldByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	recorded(t, path, 1)
	before := snap(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$", "-test.count=1")
	cmd.Env = append(childEnv(), holdEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the helper said %q (%v), want \"held\"", line, err)
	}
	_, err = Open(path, follows)
	if !errors.Is(err, ErrHeld) {
		t.Errorf("Open: %v, want ErrHeld", err)
	}
	if w := fmt.Sprintf("%s: in use (held by pid %d: %s -test.run=^TestHelperHold$", path, cmd.Process.Pid, os.Args[0]); err == nil || !strings.Contains(err.Error(), w) {
		t.Errorf("Open: %v\nwant it to say %s", err, w)
	}
	unchanged(t, path, before)
	// Once the holder has let go, the file opens.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the helper: %v", err)
	}
	s := open(t, path)
	defer s.Close()
	if s.Batch() != 1 {
		t.Errorf("Batch %d, want 1", s.Batch())
	}
}

// update changes the bbolt file at path with fn, as bbolt itself would.
func update(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestNewFileKilled: a run killed at any step of making a new file (its
// goroutine ended there, as a kill would end it) leaves no file under the
// state's name, and the next run makes one and uses it. Made in place, the
// file was a bbolt database without nodewatch's meta from the moment bbolt
// had opened it, and every later run refused it.
func TestNewFileKilled(t *testing.T) {
	for _, step := range []string{"made", "written"} {
		t.Run(step, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			crashPoint = func(at string) {
				if at == step {
					runtime.Goexit()
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Open(path, follows)
				t.Error("Open went on past the kill")
			}()
			<-done
			crashPoint = func(string) {}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("after a kill at %q: %v, want no file", step, err)
			}
			s := open(t, path)
			defer s.Close()
			if s.Resumed() {
				t.Errorf("a new file resumed")
			}
		})
	}
}

// TestNewFileMissingDirectory: a file that cannot be made is ErrBad and
// nothing is made.
func TestNewFileMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "no", "state")
	if _, err := Open(path, follows); !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open: %v, want ErrBad naming %s", err, path)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Open made %v", ents)
	}
}
