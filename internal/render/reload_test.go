//go:build unix

package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nodewatch/nodewatch/internal/render"
)

// TestReloadOwed: a reload that fails is Render's error, and is owed: the
// next Render runs it although the file is in step already, for every
// file replaced since the last reload that succeeded; then none is owed.
func TestReloadOwed(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.conf"), filepath.Join(dir, "b.conf")
	ok := filepath.Join(dir, "ok")
	reloads := filepath.Join(dir, "reloads")
	r := &render.Renderer{
		Targets: []render.Target{
			{Program: program(t, `.[0].name`), To: a},
			{Program: program(t, `.[1].name`), To: b},
		},
		Reload: fmt.Sprintf(`echo "$NODEWATCH_ATTEMPT $*" >> %s; [ -e %s ] || exit 7`, shellQuote(reloads), shellQuote(ok)),
	}
	err := r.Render(context.Background(), servers("x", "y"), 1)
	if err == nil || err.Error() != "--reload: exit status 7" {
		t.Fatalf("Render: %v, want the reload's failure", err)
	}
	if read(t, a) != "x\n" || read(t, b) != "y\n" {
		t.Errorf("the files were not replaced before the reload")
	}
	// Another failure, with only b changed: both are still owed.
	if err := r.Render(context.Background(), servers("x", "z"), 1); err == nil {
		t.Fatal("Render: nil, want the reload's failure")
	}
	if err := os.WriteFile(ok, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	renderOK(t, r, servers("x", "z")) // nothing to replace; the reload is owed
	renderOK(t, r, servers("x", "z")) // nothing owed
	want := []string{"1 " + a + " " + b, "1 " + a + " " + b, "1 " + a + " " + b}
	if got := lines(t, reloads); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("reloads:\n%q\nwant\n%q", got, want)
	}
	// A later change owes a reload for its file only.
	if err := r.Render(context.Background(), servers("w", "z"), 2); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, reloads); len(got) != 4 || got[3] != "2 "+a {
		t.Errorf("reloads: %q, want a fourth, for %s only", got, a)
	}
}

// TestReloadOneAtATime: Render is called from several goroutines at
// once; the reloads never overlap, and each Render that replaced the file
// has one.
func TestReloadOneAtATime(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "app.conf")
	lock, overlaps, count := filepath.Join(dir, "lock"), filepath.Join(dir, "overlaps"), filepath.Join(dir, "count")
	r := &render.Renderer{
		Targets: []render.Target{{Program: program(t, "."), To: to}},
		Reload: fmt.Sprintf(`mkdir %[1]s 2>/dev/null || echo overlap >> %[2]s; sleep 0.01; rmdir %[1]s; echo >> %[3]s`,
			shellQuote(lock), shellQuote(overlaps), shellQuote(count)),
	}
	const goroutines, each = 4, 5
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Every view differs from every other: each Render replaces.
				if err := r.Render(context.Background(), fmt.Sprintf("%d.%d", g, i), 1); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := lines(t, overlaps); len(got) > 0 {
		t.Errorf("%d reloads ran while another did", len(got))
	}
	if got := lines(t, count); len(got) != goroutines*each {
		t.Errorf("%d reloads, want %d", len(got), goroutines*each)
	}
}
