//go:build unix

package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodewatch/nodewatch/internal/render"
)

// TestUnchanged: a content that the file holds already is not written
// (same inode, same mtime) and is no reason to reload, also for a new
// Renderer of the same file.
func TestUnchanged(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "upstream.conf")
	reloads := filepath.Join(dir, "reloads")
	newRenderer := func() *render.Renderer {
		return &render.Renderer{
			Targets: []render.Target{{Program: program(t, serversProgram), To: to}},
			Reload:  `echo "$@" >> ` + shellQuote(reloads),
		}
	}
	r := newRenderer()
	renderOK(t, r, servers("a", "b"))
	if got, want := read(t, to), "server a:80;\nserver b:81;\n"; got != want {
		t.Fatalf("the file holds %q, want %q", got, want)
	}
	if got := lines(t, reloads); len(got) != 1 || got[0] != to {
		t.Fatalf("reloads after creating the file: %q, want one, for %s", got, to)
	}
	age(t, to)
	before := stat(t, to)
	for _, r := range []*render.Renderer{r, r, newRenderer()} {
		renderOK(t, r, servers("a", "b")) // equal, not the same values
	}
	if after := stat(t, to); after != before {
		t.Errorf("an unchanged content was written: %+v, then %+v", before, after)
	}
	if got := lines(t, reloads); len(got) != 1 {
		t.Errorf("reloads: %q, want only the first", got)
	}
	noTemps(t, dir)
}

// TestReplaced: a changed content replaces the file, which keeps its mode
// and owner; one Render that replaces two files reloads once, with both.
func TestReplaced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another owner needs root; TestOwnerUnprivileged is the other side")
	}
	dir := t.TempDir()
	reloads := filepath.Join(dir, "reloads")
	files := []struct {
		name     string
		mode     os.FileMode
		uid, gid int
	}{
		{"a.conf", 0o640, 4242, 4343},
		{"b.conf", 0o600 | os.ModeSetgid, 0, 4444},
	}
	r := &render.Renderer{Reload: `echo "$NODEWATCH_ATTEMPT" "$@" >> ` + shellQuote(reloads)}
	var tos []string
	for _, f := range files {
		to := filepath.Join(dir, f.name)
		if err := os.WriteFile(to, []byte("old\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(to, f.uid, f.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(to, f.mode); err != nil {
			t.Fatal(err)
		}
		tos = append(tos, to)
		r.Targets = append(r.Targets, render.Target{Program: program(t, serversProgram), To: to})
	}
	before := []info{stat(t, tos[0]), stat(t, tos[1])}
	if err := r.Render(context.Background(), servers("x"), 3); err != nil {
		t.Fatal(err)
	}
	for i, to := range tos {
		if got := read(t, to); got != "server x:80;\n" {
			t.Errorf("%s holds %q", to, got)
		}
		after := stat(t, to)
		if after.ino == before[i].ino {
			t.Errorf("%s was written in place, not replaced", to)
		}
		if after.mode != before[i].mode || after.uid != before[i].uid || after.gid != before[i].gid {
			t.Errorf("%s: mode %v, owner %d:%d; want them kept: %v, %d:%d", to, after.mode, after.uid, after.gid,
				before[i].mode, before[i].uid, before[i].gid)
		}
	}
	if got, want := lines(t, reloads), []string{"3 " + tos[0] + " " + tos[1]}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("reloads: %q, want %q", got, want)
	}
	noTemps(t, dir)
}

// TestNewFile: a new file gets NewFileMode whatever the umask, and a
// directory that is not there is an error, named.
func TestNewFile(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "new.conf")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	r := &render.Renderer{Targets: []render.Target{{Program: program(t, serversProgram), To: to}}}
	renderOK(t, r, servers("a"))
	if got := stat(t, to).mode; got != render.NewFileMode {
		t.Errorf("a new file has mode %v, want %v", got, render.NewFileMode)
	}

	missing := filepath.Join(dir, "no such dir", "x.conf")
	r = &render.Renderer{Targets: []render.Target{{Program: program(t, serversProgram), To: missing}}}
	err := r.Render(context.Background(), servers("a"), 1)
	if err == nil || !strings.Contains(err.Error(), "--to "+missing) {
		t.Errorf("Render into a missing directory: %v, want an error naming --to %s", err, missing)
	}
}

// TestSymlink: --to a symbolic link replaces the file it leads to, and
// leaves the link.
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "sites-available", "x.conf")
	link := filepath.Join(dir, "x.conf")
	if err := os.Mkdir(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sites-available/x.conf", link); err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Targets: []render.Target{{Program: program(t, serversProgram), To: link}}}
	renderOK(t, r, servers("a"))
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer one: %v, %v", fi.Mode(), err)
	}
	if got := read(t, real); got != "server a:80;\n" {
		t.Errorf("the file the link leads to holds %q", got)
	}
	if got := stat(t, real).mode; got != 0o640 {
		t.Errorf("mode %v, want 0640 kept", got)
	}
	noTemps(t, dir)
	noTemps(t, filepath.Dir(real))
}

// TestStaleTemps: the first Render removes what an earlier run left
// half-written beside its files, and nothing else.
func TestStaleTemps(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "x.conf")
	stale := []string{".x.conf.nodewatch-123", ".x.conf.nodewatch-4294967295"}
	kept := []string{".x.conf.nodewatch-", ".x.conf.nodewatch-12a", ".y.conf.nodewatch-1", "x.conf.nodewatch-1", ".x.conf.bak"}
	for _, name := range append(stale, kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &render.Renderer{Targets: []render.Target{{Program: program(t, serversProgram), To: to}}}
	log := logs(r)
	renderOK(t, r, servers("a"))
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", name, err)
		}
		if !strings.Contains(log.String(), "removed "+filepath.Join(dir, name)) {
			t.Errorf("the removal of %s was not logged:\n%s", name, log)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not one of ours: %v", name, err)
		}
	}
}

// TestProgramFails: a program that fails leaves its file as it was and
// is reported, rate-limited; the other targets are rendered; Strict makes
// it Render's error.
func TestProgramFails(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "warning", true: "strict"}[strict], func(t *testing.T) {
			dir := t.TempDir()
			failing := filepath.Join(dir, "failing.conf")
			other := filepath.Join(dir, "other.conf")
			if err := os.WriteFile(failing, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := &render.Renderer{
				Targets: []render.Target{
					{Program: program(t, `if length == 0 then error("no servers") else .[] | .name end`), To: failing},
					{Program: program(t, `length`), To: other},
				},
				Strict: strict,
			}
			log := logs(r)
			newClock(r)
			for range 3 {
				err := r.Render(context.Background(), []any{}, 1)
				if strict != (err != nil) || strict && !strings.Contains(err.Error(), "--to "+failing+": --render: error: no servers") {
					t.Errorf("Render: %v", err)
				}
			}
			if got := read(t, failing); got != "old\n" {
				t.Errorf("the failing program's file holds %q", got)
			}
			if got := read(t, other); got != "0\n" {
				t.Errorf("the other file holds %q", got)
			}
			if n := countLines(log.String(), "no servers"); strict && n != 0 || !strict && n != 1 {
				t.Errorf("reported %d times:\n%s", n, log)
			}
			renderOK(t, r, servers("a"))
			if got := read(t, failing); got != "a\n" {
				t.Errorf("the program succeeds again, and the file holds %q", got)
			}
			if !strict && !strings.Contains(log.String(), "succeeds again (after 2 more failures") {
				t.Errorf("the end of the failures is not reported:\n%s", log)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	p := program(t, ".")
	a := filepath.Join(dir, "a")
	if err := os.WriteFile(a, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    *render.Renderer
		want string // "" for none
	}{
		{"two files", &render.Renderer{Targets: []render.Target{{p, a}, {p, filepath.Join(dir, "b")}}, Check: "true"}, ""},
		{"twice", &render.Renderer{Targets: []render.Target{{p, a}, {p, a}}}, "--to " + a + ": given twice"},
		{"spelled otherwise", &render.Renderer{Targets: []render.Target{{p, a}, {p, dir + "/./a"}}}, "the same file as --to " + a},
		{"through a link", &render.Renderer{Targets: []render.Target{{p, a}, {p, filepath.Join(dir, "link")}}}, "the same file as --to " + a},
		{"no file", &render.Renderer{Targets: []render.Target{{p, ""}}}, "--to: want a file"},
		{"no program", &render.Renderer{Targets: []render.Target{{nil, a}}}, "no --render program"},
		{"a directory", &render.Renderer{Targets: []render.Target{{p, dir}}}, "--to " + dir + ": " + dir + " is not a regular file"},
		{"no directory", &render.Renderer{Targets: []render.Target{{p, filepath.Join(dir, "none", "x")}}}, "no directory " + filepath.Join(dir, "none")},
		{"under a file", &render.Renderer{Targets: []render.Target{{p, filepath.Join(a, "x")}}}, "--to " + filepath.Join(a, "x")},
		{"blank check", &render.Renderer{Targets: []render.Target{{p, a}}, Check: " "}, "--check: want a command"},
		{"blank reload", &render.Renderer{Targets: []render.Target{{p, a}}, Reload: "\t"}, "--reload: want a command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Validate: %v, want %q", err, c.want)
			}
		})
	}
}
