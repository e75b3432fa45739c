//go:build unix

package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Files that are refused: damaged, cut short, not nodewatch's.

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
	// changed makes the good file, changed by f.
	changed := func(f func(tx *bolt.Tx) error) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			write(t, path, goodBytes)
			update(t, path, f)
		}
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
			update(t, path, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("members"))
				if err != nil {
					return err
				}
				return b.Put([]byte("a"), []byte("b"))
			})
		}, "not nodewatch's"},
		{"an empty bbolt database", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
		}, "not nodewatch's"},
		{"another format", changed(func(tx *bolt.Tx) error {
			return tx.Bucket(metaBucket).Put(formatKey, []byte("nodewatch-state/2"))
		}), "not nodewatch's"},
		{"no view", changed(func(tx *bolt.Tx) error { return tx.DeleteBucket(viewBucket) }), "not nodewatch's"},
		{"follows not JSON", changed(func(tx *bolt.Tx) error {
			return tx.Bucket(metaBucket).Put(followsKey, []byte("key /nodes/"))
		}), "follows"},
		{"a short batch record", changed(func(tx *bolt.Tx) error {
			return tx.Bucket(metaBucket).Put(batchKey, []byte{0, 1})
		}), "batch record of 2 bytes"},
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
		{"a view value not JSON", changed(func(tx *bolt.Tx) error {
			return tx.Bucket(viewBucket).Put([]byte(id(1000)), []byte(`{"id":`))
		}), `the object of "/nodes/00001000" is not JSON`},
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
