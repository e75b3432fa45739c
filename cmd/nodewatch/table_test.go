//go:build unix

package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/watchflags"
)

// TestTableScreen: -o table on a terminal (tmux, the built binary, real
// etcd), 80 and 160 columns wide. After 100 changes (updates, new keys,
// deletions) the screen holds a header, exactly one row per key with its
// last value, sorted, and the status line, nothing scrolled; the last
// change is marked in its row; Ctrl-C gives the terminal back as it was:
// the alternate screen left, what the shell showed before back.
func TestTableScreen(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed (.ci/run installs it)")
	}
	for _, width := range []int{80, 160} {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			t.Parallel()
			testTableScreen(t, width)
		})
	}
}

func testTableScreen(t *testing.T, width int) {
	etcd, c := etcdtest.StartWith(t)
	values := map[string]string{}
	var rev int64
	put := func(k, v string) { rev, values[k] = etcdtest.Put(t, c, k, v), v }
	for i := range 12 {
		put(fmt.Sprintf("/t/k%02d", i), fmt.Sprintf("initial %d", i))
	}
	// Wider than 80 columns: cut there, whole at 160.
	put("/t/long", strings.Repeat("a long value ", 9)+"end")
	s := startTerminal(t, width, 40)
	s.keys("-l", "echo before the table")
	s.keys("Enter")
	s.waitScreen(func(lines []string) bool { return slices.Contains(lines, "before the table") })
	s.keys("-l", "nodewatch key --etcd "+etcd+" --prefix /t/ -o table")
	s.keys("Enter")
	s.waitScreen(func(lines []string) bool {
		return len(lines) == 15 && strings.HasPrefix(lines[0], "KEY") && strings.HasPrefix(lines[14], "13 objects")
	})

	// 100 changes: updates, new keys, deletions; the last an update of k05.
	for i := range 99 {
		switch k := fmt.Sprintf("/t/k%02d", i%16); {
		case i%10 == 9:
			rev = etcdtest.Delete(t, c, k)
			delete(values, k)
		default:
			put(k, fmt.Sprintf("change %d", i))
		}
	}
	put("/t/k05", "the last change")
	status := regexp.MustCompile(fmt.Sprintf(`^%d objects · rev %d · last change \d+\w* ago$`, len(values), rev))
	keys := slices.Sorted(maps.Keys(values))
	s.waitScreen(func(lines []string) bool {
		return len(lines) == len(keys)+2 && status.MatchString(lines[len(lines)-1]) &&
			strings.Contains(lines[slices.Index(keys, "/t/k05")+1], "the last change")
	})
	screen := s.screen()
	if !strings.HasPrefix(screen[0], "KEY") || !strings.Contains(screen[0], "VALUE") || !strings.Contains(screen[0], "REV") {
		t.Errorf("header: %q", screen[0])
	}
	for i, k := range keys {
		f := strings.Fields(screen[i+1])
		if len(f) < 3 || f[0] != k {
			t.Errorf("row %d: %q, want %s %q", i+1, screen[i+1], k, values[k])
			continue
		}
		v := strings.Join(f[1:len(f)-1], " ")
		if cut, ok := strings.CutSuffix(v, "…"); ok && width == 80 && strings.HasPrefix(values[k], cut) {
			v = values[k]
		}
		if v != values[k] {
			t.Errorf("row %d: %q, want %s %q", i+1, screen[i+1], k, values[k])
		}
	}
	for _, l := range screen {
		if utf8.RuneCountInString(l) >= width || l == "before the table" {
			t.Errorf("a line that should not be there: %q", l)
		}
	}
	// The last change is marked (reverse video), in its row only.
	for _, l := range strings.Split(s.tmux("capture-pane", "-p", "-e", "-t", "0"), "\n") {
		if marked := strings.Contains(l, "7m"); marked != strings.Contains(l, "the last change") {
			t.Errorf("marked %v: %q", marked, l)
		}
	}
	if on := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "0", "#{alternate_on}")); on != "1" {
		t.Errorf("alternate_on = %s while the table shows", on)
	}

	s.keys("C-c")
	s.waitScreen(func(lines []string) bool {
		return len(lines) > 0 && lines[len(lines)-1] == "$" && slices.Contains(lines, "before the table")
	})
	for _, l := range s.screen() {
		if strings.HasPrefix(l, "KEY") || strings.Contains(l, "objects ·") {
			t.Errorf("the table stayed after Ctrl-C: %q", l)
		}
	}
	if on := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "0", "#{alternate_on}")); on != "0" {
		t.Errorf("alternate_on = %s after Ctrl-C", on)
	}
	s.keys("-l", "echo exit=$?")
	s.keys("Enter")
	s.waitScreen(func(lines []string) bool { return slices.Contains(lines, "exit=130") })
}

// startTerminal starts bash in tmux, width×height, with the built
// nodewatch first on PATH and the prompt "$ ".
func startTerminal(t *testing.T, width, height int) *tmuxShell {
	t.Helper()
	s := &tmuxShell{t: t, socket: filepath.Join(t.TempDir(), "tmux")}
	home := t.TempDir()
	cmd := exec.Command("tmux", "-S", s.socket, "-f", "/dev/null", "new-session", "-d", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height),
		"-c", home, "--", "bash", "--norc", "--noprofile")
	cmd.Env = []string{"PATH=" + filepath.Dir(binary(t)) + ":/usr/bin:/bin", "HOME=" + home, "TERM=xterm", "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	s.keys("PS1='$ '", "Enter")
	s.clear()
	return s
}

// TestTableDefaultColumns: the commands' default columns compile, with and
// without --health, and show what -o text's summary shows of a node.
func TestTableDefaultColumns(t *testing.T) {
	node := jsondoc.New([]byte(`{"id":"n1","state":"NODE_STATE_UP","health":"HEALTH_HEALTHY","status":{"external_address":"10.0.0.1"},` +
		`"roles":{"kubernetes_worker":{},"consensus_member":{}},"labels":{"pairs":[{"key":"zone","value":"east"}]}}`))
	for spec, want := range map[string][]string{
		nodeColumns(false): {"n1", "UP", "10.0.0.1", "consensus_member,kubernetes_worker", "zone=east", ""},
		nodeColumns(true):  {"n1", "UP", "HEALTHY", "10.0.0.1", "consensus_member,kubernetes_worker", "zone=east", ""},
		keyColumns:         {"<none>", "<none>", "<none>"},
	} {
		cols, err := watchflags.Columns("default", spec, jq.Vars{})
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		var got []string
		for _, c := range cols {
			if c.Age {
				got = append(got, "")
				continue
			}
			got = append(got, c.Value(node))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", spec, diff)
		}
	}
}

// TestE2ETablePipe: -o table into a pipe, as `nodewatch key -o table |
// grep` reads it: the header once, then a row a change as it comes (a
// deleted one marked), never a screen's escape sequences.
func TestE2ETablePipe(t *testing.T) {
	t.Parallel()
	ep, c := etcdtest.StartWith(t, "/tp/a", "1")
	cmd := command(t, "key", "/tp/", "--prefix", "--etcd", ep, "-o", "table")
	lines, stderr := startLines(t, cmd)
	next := func(want string) {
		t.Helper()
		l, ok := <-lines
		if !ok || !regexp.MustCompile(want).MatchString(l) || strings.Contains(l, "\x1b") {
			t.Fatalf("line %q (open %v), want /%s/; stderr:\n%s", l, ok, want, stderr)
		}
	}
	next(`^KEY +VALUE +REV$`)
	next(`^/tp/a +1 +2$`)
	etcdtest.Put(t, c, "/tp/b", "2")
	next(`^/tp/b +2 +3$`)
	etcdtest.Delete(t, c, "/tp/a")
	next(`^/tp/a +1 +2 +\(deleted\)$`)
}
