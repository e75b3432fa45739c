//go:build unix

package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
		{"two fields", []Field{{"command", "nodes"}, {"prefix", "/nodes/"}, {"filter", "true"}},
			[]string{`command is "key" there, "nodes" here`, `filter is ".state == \"UP\"" there, "true" here`}},
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

// TestBad: files that are not usable state files are refused as ErrBad,
// with a message naming them, and left exactly as they were.
func TestBad(t *testing.T) {
	dir := t.TempDir()
	// A state file to damage.
	good := filepath.Join(dir, "good")
	recorded(t, good, 2000)
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// used is how much of it bbolt uses; freelist and leaves are pages of
	// it.
	var (
		used     int64
		freelist int
		leaves   []int
	)
	// tx.Page needs the freelist, which only a writable open reads.
	db, err := bolt.Open(good, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := func() error {
		used = tx.Size()
		for id := 2; int64(id*os.Getpagesize()) < used; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			switch p.Type {
			case "freelist":
				freelist = id
			case "leaf":
				leaves = append(leaves, id)
			}
		}
		return nil
	}(); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	db.Close()
	if used > int64(len(goodBytes)) || used <= int64(len(goodBytes))/2 || freelist == 0 || len(leaves) < 100 {
		t.Fatalf("a file of %d bytes uses %d, freelist at page %d, %d leaves", len(goodBytes), used, freelist, len(leaves))
	}
	// scrambled returns the good file with page id overwritten with
	// random bytes.
	scrambled := func(id int) []byte {
		b := bytes.Clone(goodBytes)
		ps := os.Getpagesize()
		rand.NewChaCha8([32]byte{byte(id)}).Read(b[id*ps : (id+1)*ps])
		return b
	}

	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
		want string // in the message, beside the path
	}{
		{"garbage", func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			r := rand.NewChaCha8([32]byte{1})
			r.Read(b)
			write(t, path, b)
		}, "invalid"},
		{"garbage of one byte", func(t *testing.T, path string) { write(t, path, []byte{'x'}) }, ""},
		{"text", func(t *testing.T, path string) {
			write(t, path, []byte(strings.Repeat(`{"id":"/nodes/a"}`+"\n", 1000)))
		}, ""},
		{"empty", func(t *testing.T, path string) { write(t, path, nil) }, "empty"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(path, "x"), []byte("x"))
		}, "not a regular file"},
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"another bbolt database", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("members"))
				if err != nil {
					return err
				}
				return b.Put([]byte("a"), []byte("b"))
			}); err != nil {
				t.Fatal(err)
			}
		}, "not nodewatch's"},
		{"an empty bbolt database", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
		}, "not nodewatch's"},
		{"another format", func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(formatKey, []byte("nodewatch-state/2")) })
		}, "not nodewatch's"},
		{"no view", func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(viewBucket) })
		}, "not nodewatch's"},
		{"follows not JSON", func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(followsKey, []byte("key /nodes/")) })
		}, "follows"},
		{"a short batch record", func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(batchKey, []byte{0, 1}) })
		}, "batch record of 2 bytes"},
		{"truncated to half", func(t *testing.T, path string) {
			write(t, path, goodBytes[:len(goodBytes)/2])
		}, ""},
		{"truncated to two pages", func(t *testing.T, path string) {
			write(t, path, goodBytes[:2*os.Getpagesize()])
		}, ""},
		{"truncated by its last page", func(t *testing.T, path string) {
			// bbolt grows a file ahead of its use: what is missing
			// is the last page its meta says it uses.
			write(t, path, goodBytes[:used-int64(os.Getpagesize())])
		}, ""},
		{"meta pages zeroed", func(t *testing.T, path string) {
			b := bytes.Clone(goodBytes)
			clear(b[:os.Getpagesize()])
			clear(b[os.Getpagesize() : 2*os.Getpagesize()])
			write(t, path, b)
		}, "invalid"},
		{"the freelist page scrambled", func(t *testing.T, path string) {
			write(t, path, scrambled(freelist))
		}, ""},
		{"a leaf page scrambled", func(t *testing.T, path string) {
			write(t, path, scrambled(leaves[len(leaves)/2]))
		}, ""},
		{"a value that runs past the end of the file", func(t *testing.T, path string) {
			// The file is what bbolt uses and pages of spaces after it,
			// a size that bbolt's memory map (a power of two) goes
			// beyond. A leaf page is a 16-byte header, then 16 bytes
			// for each element: flags, pos, ksize, vsize, in the
			// machine's byte order; the value is at pos from its
			// element, after the key. The first value of a leaf is
			// made the spaces and 2 pages more: JSON's scanner skips
			// the spaces and reads past the end of the file (SIGBUS).
			ps := os.Getpagesize()
			size := int(used) + ps
			for size&(size-1) == 0 {
				size += ps
			}
			b := bytes.Repeat([]byte{' '}, size)
			copy(b, goodBytes[:used])
			elem := leaves[len(leaves)/2]*ps + 16
			ksize := int(binary.NativeEndian.Uint32(b[elem+8:]))
			binary.NativeEndian.PutUint32(b[elem+4:], uint32(int(used)-elem-ksize))
			binary.NativeEndian.PutUint32(b[elem+12:], uint32(size-int(used)+2*ps))
			write(t, path, b)
		}, ""},
		{"a view value not JSON", func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(viewBucket).Put([]byte(id(1000)), []byte(`{"id":`)) })
		}, `the object of "/nodes/00001000" is not JSON`},
		{"unreadable", func(t *testing.T, path string) {
			if os.Geteuid() == 0 {
				t.Skip("root reads a file of mode 000")
			}
			write(t, path, goodBytes)
			if err := os.Chmod(path, 0); err != nil {
				t.Fatal(err)
			}
		}, "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			c.make(t, path)
			oldMtime(t, path)
			before := snap(t, path)
			bad, msg := openInChild(t, path)
			if !bad {
				t.Errorf("Open and View: %s, want ErrBad", msg)
			}
			for _, w := range []string{"--state " + path + ": ", c.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("Open and View: %s\nwant it to say %q", msg, w)
				}
			}
			unchanged(t, path, before)
			if c.name == "directory" {
				if ents, _ := os.ReadDir(path); len(ents) != 1 {
					t.Errorf("the directory holds %d entries, want 1", len(ents))
				}
			}
		})
	}
}

// openEnv names the file that TestHelperOpen opens, in the process that
// openInChild starts.
const openEnv = "NODEWATCH_STATE_TEST_OPEN"

// TestHelperOpen is not a test: in a process started by openInChild, it
// opens a file as a run would, reads its view and closes it, and prints
// whether that was ErrBad, then the error.
func TestHelperOpen(t *testing.T) {
	path := os.Getenv(openEnv)
	if path == "" {
		t.Skip("a helper of openInChild")
	}
	err := func() error {
		s, err := Open(path, follows)
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.View()
		return err
	}()
	fmt.Printf("result: %v\n%v\n", errors.Is(err, ErrBad), err)
	os.Exit(0)
}

// openInChild opens path as a run would, reads its view and closes it,
// in another process: a damaged file may make bbolt fault, which ends a
// process. It returns whether that was ErrBad, and the error's message;
// a crash fails t.
func openInChild(t *testing.T, path string) (bad bool, msg string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOpen$", "-test.count=1")
	cmd.Env = append(childEnv(), openEnv+"="+path)
	out, err := cmd.CombinedOutput()
	_, res, ok := bytes.Cut(out, []byte("result: "))
	if err != nil || !ok {
		t.Errorf("Open and View crashed (%v):\n%s", err, out)
		return false, "crashed"
	}
	b, msg, _ := strings.Cut(strings.TrimSuffix(string(res), "\n"), "\n")
	return b == "true", msg
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
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

// TestRecordWritesTheBatch: recording one change writes as many pages in
// a view of 100,000 objects as in one of 1,000, give or take the depth
// of the tree; rewriting the view would write thousands.
func TestRecordWritesTheBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a view of 100,000 objects")
	}
	writes := map[int]int{}
	for _, n := range []int{1000, 100_000} {
		path := filepath.Join(t.TempDir(), "state")
		s := open(t, path)
		// Small objects, for a view that is quick to make and deep.
		fillWith(t, s, n, `{"state":"NODE_STATE_UP"}`)
		st := s.db.Stats()
		before := st.TxStats.GetWrite()
		fiBefore, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		const batches = 20
		for i := range batches {
			ev := flow.Event{Type: flow.Updated, ID: id(i * 37 % n), Object: doc(`{"state":"NODE_STATE_` + strconv.Itoa(i) + `"}`)}
			if err := s.Record(s.Batch()+1, int64(n+i), []flow.Event{ev}); err != nil {
				t.Fatal(err)
			}
		}
		st = s.db.Stats()
		after := st.TxStats.GetWrite()
		fiAfter, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		writes[n] = int(after-before) / batches
		t.Logf("view of %d: %.1f page writes a Record, file %d → %d bytes", n, float64(after-before)/batches, fiBefore.Size(), fiAfter.Size())
		// A Record writes the changed leaf, its branches, the meta
		// bucket's, the root's, the freelist: a handful.
		if writes[n] > 10 {
			t.Errorf("view of %d: %d page writes a Record, want a handful", n, writes[n])
		}
		// The file does not grow by more than a few pages either.
		if grown := fiAfter.Size() - fiBefore.Size(); grown > 64<<10 {
			t.Errorf("view of %d: the file grew by %d bytes in %d Records of one change", n, grown, batches)
		}
	}
	if writes[100_000] > writes[1000]+3 {
		t.Errorf("page writes a Record: %d in a view of 100,000, %d in one of 1,000: want about the same", writes[100_000], writes[1000])
	}
}

// BenchmarkRecord records one updated object a batch into a view of 1,000
// and one of 100,000 objects: the cost should not grow with the view.
// bbolt's fsyncs of each commit take most of it.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchRecord(b, n, false) })
	}
}

// BenchmarkRecordNoSync is BenchmarkRecord without the fsyncs: what is
// left is the CPU and the page cache, which grow with the depth of the
// tree (the log of the view).
func BenchmarkRecordNoSync(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchRecord(b, n, true) })
	}
}

// BenchmarkDeliver is what --state costs a delivered batch of one
// object: noted in flight, then recorded (two commits), beside
// BenchmarkRecord's one.
func BenchmarkDeliver(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run("view="+strconv.Itoa(n), func(b *testing.B) { benchDeliver(b, n) })
	}
}

func benchDeliver(b *testing.B, n int) {
	path := filepath.Join(b.TempDir(), "state")
	s := open(b, path)
	defer s.Close()
	fill(b, s, n)
	docs := []*jsondoc.Doc{
		doc(strings.Replace(testkit.NodeJSON, "NODE_STATE_UP", "NODE_STATE_DOWN", 1)),
		doc(testkit.NodeJSON),
	}
	events := make([]flow.Event, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		events[0] = flow.Event{Type: flow.Updated, ID: id(i * 7919 % n), Object: docs[i%2]}
		if err := s.MarkInFlight(events); err != nil {
			b.Fatal(err)
		}
		if err := s.Record(s.Batch()+1, int64(n+i), events); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func benchRecord(b *testing.B, n int, noSync bool) {
	path := filepath.Join(b.TempDir(), "state")
	s := open(b, path)
	defer s.Close()
	fill(b, s, n)
	s.db.NoSync = noSync
	docs := []*jsondoc.Doc{
		doc(strings.Replace(testkit.NodeJSON, "NODE_STATE_UP", "NODE_STATE_DOWN", 1)),
		doc(testkit.NodeJSON),
	}
	events := make([]flow.Event, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		events[0] = flow.Event{Type: flow.Updated, ID: id(i * 7919 % n), Object: docs[i%2]}
		if err := s.Record(s.Batch()+1, int64(n+i), events); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
