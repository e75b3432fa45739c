// Package state keeps what a run has delivered (--state FILE), so that a
// later run picks up where it left off: the delivered view (every object
// by id, as the JSON it was printed as), the number of the last batch
// delivered and the revision it brought the view to.
//
// The file is a bbolt database (etcd's own storage engine): recording a
// batch is one transaction that writes only the ids the batch changed, so
// its cost grows with the batch, not with the view, and a kill at any
// moment leaves either the batch before or the batch after.
//
// Before a batch is delivered, its ids are noted as in flight
// (inflight.go): a run killed before it recorded the batch leaves them,
// and the next run delivers them again, so that no change is missed.
//
// The file knows what it follows (Follows): a run that follows something
// else is refused. A file that is held by another process, unreadable or
// not a state file is refused too, and left exactly as it was: nothing
// is ever reset.
package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// format is the version of the file's layout.
const format = "nodewatch-state/1"

// The buckets and keys of the file.
var (
	metaBucket = []byte("meta")
	viewBucket = []byte("view")
	formatKey  = []byte("format")
	followsKey = []byte("follows")
	batchKey   = []byte("batch")
)

// Field is one thing a state file follows: a name (the command, a flag)
// and its value in the run that made the file.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Store is an open state file. It is used by one goroutine.
type Store struct {
	path string
	db   *bolt.DB
	// Batch and Rev are those of the last batch recorded (0 for none).
	batch int
	rev   int64
	// inflight: the file may hold ids in flight (inflight.go).
	inflight bool
}

// Errors of Open, for callers that tell them apart; every error Open
// returns names the file and says how to go on.
var (
	// ErrMismatch: the file follows something else than this run.
	ErrMismatch = errors.New("the file follows another watch")
	// ErrHeld: another process has the file open.
	ErrHeld = errors.New("in use")
	// ErrBad: the file cannot be read, or is not a state file.
	ErrBad = errors.New("not a usable state file")
)

// lockWait is how long Open waits for another process to let go of the
// file (bbolt takes an exclusive flock).
const lockWait = 200 * time.Millisecond

// Open opens the state file at path, creating it if it does not exist,
// for a run that follows what follows describes.
func Open(path string, follows []Field) (*Store, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("--state %s: %w: not a regular file", path, ErrBad)
	case err == nil && fi.Size() == 0:
		// bbolt would make it a new database: an empty file is no state,
		// and whoever made it may want it.
		return nil, fmt.Errorf("--state %s: %w: the file is empty (remove it to start afresh)", path, ErrBad)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("--state %s: %w: %v", path, ErrBad, err)
	}
	s := &Store{path: path}
	if err != nil { // none yet
		switch err := s.make(follows); {
		case errors.Is(err, fs.ErrExist):
			// Made by another run meanwhile: opened as any file is.
		case err != nil:
			return nil, err
		}
		if fi, err = os.Stat(path); err != nil {
			return nil, fmt.Errorf("--state %s: %w: %v", path, ErrBad, err)
		}
	}
	// Read-only first: bbolt's read-write open reads the freelist (which
	// faults on a file cut short) and may write it back.
	if s.db, err = s.open(s.path, true); err != nil {
		return nil, err
	}
	err = s.check(follows, fi.Size())
	s.db.Close()
	if err != nil {
		return nil, err
	}
	if s.db, err = s.open(s.path, false); err != nil {
		return nil, err
	}
	return s, nil
}

// make makes a new state file at s.path, whole or not at all: under a
// temporary name beside it, then, once its meta is written, linked to
// its name, which fails (fs.ErrExist) if a file took that name
// meanwhile. A run killed while it made the file leaves at most the
// temporary one, never a bbolt database without nodewatch's meta that
// the next run would refuse (as it did when the file was made in place).
func (s *Store) make(follows []Field) error {
	dir, base := filepath.Split(s.path)
	tmp, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return fmt.Errorf("--state %s: %w: %v", s.path, ErrBad, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	if s.db, err = s.open(name, false); err != nil { // bbolt makes a database of an empty file
		return err
	}
	crashPoint("made")
	err = s.create(follows)
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.db = nil
	if err != nil {
		return fmt.Errorf("--state %s: %w: %v", s.path, ErrBad, err)
	}
	crashPoint("written")
	if err := os.Link(name, s.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("--state %s: %w: %v", s.path, ErrBad, err)
	}
	// The name, as the file, survives a crash.
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// crashPoint is called at each step of making a new file: a no-op, but
// for a test that ends the goroutine there, as a kill would.
var crashPoint = func(step string) {}

// open opens the file with bbolt, read-only or not. bbolt's read-write
// open reads the freelist, and panics when it is damaged: that is a bad
// file too (its descriptor is lost; the run ends).
func (s *Store) open(path string, readOnly bool) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, s.bad("%v", p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockWait, ReadOnly: readOnly})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("--state %s: %w%s: one file follows for one run at a time", s.path, ErrHeld, holder(s.path))
	case err != nil:
		return nil, fmt.Errorf("--state %s: %w: %v (move it away to start afresh)", s.path, ErrBad, err)
	}
	return db, nil
}

// create writes the meta of a new file.
func (s *Store) create(follows []Field) error {
	f, err := json.Marshal(follows)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(viewBucket); err != nil {
			return err
		}
		if err := m.Put(formatKey, []byte(format)); err != nil {
			return err
		}
		return m.Put(followsKey, f)
	})
}

// check reads the meta of an existing file of size bytes and compares
// what it follows with follows. It only reads.
func (s *Store) check(follows []Field, size int64) (err error) {
	return s.view(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			// Cut short (a copy, a full disk): the first read of a
			// missing page would fault.
			return s.bad("%d bytes, where its meta says %d: cut short", size, tx.Size())
		}
		m := tx.Bucket(metaBucket)
		if m == nil || tx.Bucket(viewBucket) == nil || string(m.Get(formatKey)) != format {
			return fmt.Errorf("--state %s: %w: a bbolt database, but not nodewatch's (move it away to start afresh)", s.path, ErrBad)
		}
		var had []Field
		if err := json.Unmarshal(m.Get(followsKey), &had); err != nil {
			return s.bad("follows: %v", err)
		}
		if d := differences(had, follows); d != "" {
			return fmt.Errorf("--state %s: %w: %s; to start afresh, remove the file or give another one", s.path, ErrMismatch, d)
		}
		if b := m.Get(batchKey); b != nil {
			if len(b) != 16 {
				return s.bad("batch record of %d bytes", len(b))
			}
			s.batch = int(binary.BigEndian.Uint64(b))
			s.rev = int64(binary.BigEndian.Uint64(b[8:]))
		}
		if b := tx.Bucket(inflightBucket); b != nil {
			k, _ := b.Cursor().First()
			s.inflight = k != nil
		}
		return nil
	})
}

// view runs fn in a read transaction, turning a panic of bbolt over a
// damaged file into an error, and a fault in its memory map of the file
// too (a value that runs past the end of the file).
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = s.bad("%v", p)
		}
	}()
	return s.db.View(fn)
}

func (s *Store) bad(format string, args ...any) error {
	return fmt.Errorf("--state %s: %w: %s (move it away to start afresh)", s.path, ErrBad, fmt.Sprintf(format, args...))
}

// differences describes how had (the file's) and want (this run's)
// differ; "" if they do not. A file of another command is said to be
// that alone: every setting of the two differs, and listing them would
// bury the one that matters. Values are compared without the spaces
// around them (older files kept a lone space for --mgmt unset).
func differences(had, want []Field) string {
	values := func(fs []Field) map[string]string {
		m := make(map[string]string, len(fs))
		for _, f := range fs {
			m[f.Name] = strings.TrimSpace(f.Value)
		}
		return m
	}
	h, w := values(had), values(want)
	if hc, wc := h["command"], w["command"]; hc != wc && hc != "" && wc != "" {
		return fmt.Sprintf("it is the state of a %s run, this is a %s run", strconv.Quote(hc), strconv.Quote(wc))
	}
	var d []string
	seen := map[string]bool{}
	for _, f := range append(append([]Field{}, had...), want...) {
		if seen[f.Name] {
			continue
		}
		seen[f.Name] = true
		if h[f.Name] != w[f.Name] {
			d = append(d, fmt.Sprintf("%s is %s there, %s here", f.Name, shown(h[f.Name]), shown(w[f.Name])))
		}
	}
	return strings.Join(d, "; ")
}

func shown(v string) string {
	if v == "" {
		return "unset"
	}
	return strconv.Quote(v)
}

// Resumed reports whether an earlier run recorded a batch, or noted one
// in flight: then the view (and what is in flight) is where this run
// starts.
func (s *Store) Resumed() bool { return s.batch > 0 || s.inflight }

// Batch and Rev return the number of the last batch recorded and the
// revision it brought the view to.
func (s *Store) Batch() int   { return s.batch }
func (s *Store) Rev() int64   { return s.rev }
func (s *Store) Path() string { return s.path }

// View reads the recorded view, in id order, as the changes that build
// it. A value that is not JSON makes it an ErrBad error.
func (s *Store) View() ([]flow.Change, error) {
	var view []flow.Change
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(viewBucket).ForEach(func(k, v []byte) error {
			if !json.Valid(v) {
				return s.bad("the object of %q is not JSON", k)
			}
			view = append(view, flow.Change{ID: string(k), Object: jsondoc.New(bytes.Clone(v)), Rev: s.rev})
			return nil
		})
	})
	return view, err
}

// Record records that batch (numbered batch, bringing the view to rev)
// was delivered: its events' objects are written, its deletions removed,
// and its ids are no longer in flight, in one transaction. Objects must
// be *jsondoc.Doc.
func (s *Store) Record(batch int, rev int64, events []flow.Event) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(viewBucket)
		for _, ev := range events {
			var err error
			switch ev.Type {
			case flow.New, flow.Updated:
				doc, ok := ev.Object.(*jsondoc.Doc)
				if !ok {
					return fmt.Errorf("%q: object of type %T", ev.ID, ev.Object)
				}
				err = v.Put([]byte(ev.ID), doc.JSON())
			case flow.Deleted:
				err = v.Delete([]byte(ev.ID))
			}
			if err != nil {
				return err
			}
		}
		if err := s.clearInFlight(tx, events); err != nil {
			return err
		}
		var b [16]byte
		binary.BigEndian.PutUint64(b[:], uint64(batch))
		binary.BigEndian.PutUint64(b[8:], uint64(rev))
		return tx.Bucket(metaBucket).Put(batchKey, b[:])
	})
	if err != nil {
		return fmt.Errorf("--state %s: recording batch %d: %w", s.path, batch, err)
	}
	s.batch, s.rev = batch, rev
	return nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }
