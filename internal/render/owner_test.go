//go:build unix

package render_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOwnerUnprivileged: a nodewatch without the rights to give a file
// its owner back (a user of its own, run by root here) still replaces
// it, keeping its mode, and the group if it is one of its members; the
// warning says what the file's owner became.
func TestOwnerUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a child as another user")
	}
	const me, them = 12345, 54321
	// The child, another user, must reach its binary and files: not
	// under TMPDIR, which may be private (make test's in CI is 0700),
	// but in a directory of /tmp, which anyone can enter.
	base, err := os.MkdirTemp("/tmp", "nodewatch-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "render.test")
	copyFile(t, bin, os.Args[0])
	for _, c := range []struct {
		name             string
		owner, group     int
		groups           []uint32 // the child's supplementary groups
		wantUID, wantGID uint32
		warning          string // how the warning ends; "" for none
	}{
		{"another's", them, them, nil, me, me, "operation not permitted): the new file is owned by 12345:12345"},
		{"another's, of a group of ours", them, them, []uint32{them}, me, them, "operation not permitted): the new file is owned by 12345:54321"},
		{"ours", me, me, nil, me, me, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(base, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // beyond the umask
				t.Fatal(err)
			}
			to := filepath.Join(dir, "app.conf")
			if err := os.WriteFile(to, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(to, c.owner, c.group); err != nil {
				t.Fatal(err)
			}
			before := stat(t, to)
			ch := startChild(t, bin, &syscall.Credential{Uid: me, Gid: me, Groups: c.groups},
				childEnv+"=render", childTo+"="+to, childView+"=new")
			ch.wait(t)
			after := stat(t, to)
			if read(t, to) != "new\n" || after.ino == before.ino {
				t.Errorf("the file was not replaced: %q", read(t, to))
			}
			if after.mode != before.mode || after.uid != c.wantUID || after.gid != c.wantGID {
				t.Errorf("mode %v, owner %d:%d; want %v, %d:%d", after.mode, after.uid, after.gid, before.mode, c.wantUID, c.wantGID)
			}
			var warnings []string
			for _, l := range strings.Split(ch.stderr.String(), "\n") {
				if w, ok := strings.CutPrefix(l, "warning: "); ok {
					warnings = append(warnings, w)
				}
			}
			if c.warning == "" && len(warnings) > 0 {
				t.Errorf("warnings: %q, want none", warnings)
			}
			if c.warning != "" {
				if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "--to "+to+": cannot keep its owner 54321:54321 (chown ") ||
					!strings.HasSuffix(warnings[0], c.warning) {
					t.Errorf("warnings: %q, want one like %q", warnings, c.warning)
				}
			}
			noTemps(t, dir)
		})
	}
}

// copyFile copies the file from to the new executable file to.
func copyFile(t *testing.T, to, from string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
