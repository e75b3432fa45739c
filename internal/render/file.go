package render

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NewFileMode is the mode of a file that --render creates, set as it is
// (the umask does not apply), as consul-template's perms default. A file
// that exists keeps its mode.
const NewFileMode fs.FileMode = 0o644

// keptMode is what of an existing file's mode its replacement gets.
const keptMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// tempMarker is in the name of every temporary file: .FILE.nodewatch-N,
// N decimal (os.CreateTemp's), so that one a killed run left behind is
// known for nodewatch's, and for FILE's.
const tempMarker = ".nodewatch-"

// tempPrefix is the name of FILE's temporary files, up to their number.
func tempPrefix(base string) string { return "." + base + tempMarker }

// isTemp reports whether name is one of base's temporary files.
func isTemp(name, base string) bool {
	n, ok := strings.CutPrefix(name, tempPrefix(base))
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// resolve returns the file that --to names: to itself, or what the
// symbolic links it names lead to (a link is left a link, its target is
// replaced), and its FileInfo, nil when it does not exist. Anything but a
// regular file is an error.
func resolve(to string) (string, fs.FileInfo, error) {
	path := to
	if p, err := filepath.EvalSymlinks(to); err == nil {
		path = p
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, nil, nil
	case err != nil:
		return "", nil, err
	case !fi.Mode().IsRegular():
		return "", nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	return path, fi, nil
}

// holds reports whether the file at path, of size size, holds exactly
// want; scratch is a buffer to read it into, returned for the next time.
func holds(path string, size int64, want, scratch []byte) (bool, []byte, error) {
	if size != int64(len(want)) {
		return false, scratch, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, scratch, err
	}
	defer f.Close()
	// One byte more than want: a file that grew since its Stat differs.
	if cap(scratch) < len(want)+1 {
		scratch = make([]byte, len(want)+1)
	}
	got := scratch[:len(want)+1]
	n, err := io.ReadFull(f, got)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, scratch, err
	}
	return string(got[:n]) == string(want), scratch, nil
}

// writeTemp writes content to a new temporary file beside path, with the
// mode and owner of old (the file it is to replace, nil for none), and
// syncs it. It returns the file's name, and a warning when old's owner
// could not be kept, which is not a reason not to replace it. On error
// nothing is left behind.
func writeTemp(path string, old fs.FileInfo, content []byte) (name string, warning, err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return "", nil, err
	}
	name = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
		}
	}()
	mode := NewFileMode
	if old != nil {
		mode = old.Mode() & keptMode
		// Before the mode: a chown clears set-id bits.
		warning = keepOwner(f, old)
	}
	if err := f.Chmod(mode); err != nil {
		return "", nil, err
	}
	if _, err := f.Write(content); err != nil {
		return "", nil, err
	}
	if err := f.Sync(); err != nil {
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		return "", nil, err
	}
	return name, warning, nil
}

// replace renames the temporary file name over path, and syncs path's
// directory, so that the new name is as durable as the content. It
// reports whether it renamed: a directory that fails to sync does after.
func replace(name, path string) (renamed bool, err error) {
	if err := os.Rename(name, path); err != nil {
		return false, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return true, fmt.Errorf("sync its directory: %w", err)
	}
	return true, nil
}

// cleanTemps removes the temporary files of to's file that a run killed
// while it wrote them left behind, and returns their names.
func cleanTemps(to string) ([]string, error) {
	path, _, err := resolve(to)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name(), base) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
