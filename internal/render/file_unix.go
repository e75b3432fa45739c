//go:build unix

package render

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f, the new content of the file that old describes,
// old's owner and group. Without the rights to (not root, nor CAP_CHOWN)
// it keeps the group if nodewatch is one of its members, and says what
// it could not keep: f stays nodewatch's (its user, and the group that
// new files in its directory get).
func keepOwner(f *os.File, old fs.FileInfo) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	got, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || got.Uid == want.Uid && got.Gid == want.Gid {
		return nil
	}
	err = f.Chown(int(want.Uid), int(want.Gid))
	if err == nil {
		return nil
	}
	gid := got.Gid
	if got.Gid != want.Gid && f.Chown(-1, int(want.Gid)) == nil {
		gid = want.Gid
	}
	return fmt.Errorf("cannot keep its owner %d:%d (%v): the new file is owned by %d:%d", want.Uid, want.Gid, err, got.Uid, gid)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
