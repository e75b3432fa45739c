//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// tmuxShell is an interactive shell in a tmux session of its own: a
// real line editor on a pseudo-terminal, as a user has it.
type tmuxShell struct {
	t      *testing.T
	socket string
}

// startShell starts shell (bash, zsh or fish) in tmux with the built
// nodewatch first on PATH, NODEWATCH_ETCD set to a live etcd (so that a
// completion that ran a watch would hang), in dir, with the prompt "$ "
// and nodewatch's completion loaded as its `completion` command prints it.
func startShell(t *testing.T, shell, etcd, dir string) *tmuxShell {
	t.Helper()
	for _, tool := range []string{"tmux", shell} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	argv := map[string][]string{
		"bash": {"bash", "--norc", "--noprofile"},
		"zsh":  {"zsh", "-f"},
		"fish": {"fish", "--no-config"},
	}[shell]
	setup := map[string]string{
		"bash": `PS1='$ '; bind 'set show-all-if-ambiguous on'; bind 'set completion-query-items 1000'; bind 'set page-completions off'; source <(nodewatch completion bash)`,
		"zsh":  `PROMPT='$ '; LISTMAX=1000; unsetopt LIST_AMBIGUOUS; autoload -U compinit; compinit -u; source <(nodewatch completion zsh)`,
		"fish": `function fish_prompt; echo -n '$ '; end; set -g fish_greeting; nodewatch completion fish | source`,
	}[shell]
	s := &tmuxShell{t: t, socket: filepath.Join(t.TempDir(), "tmux")}
	home := t.TempDir()
	env := []string{"PATH=" + filepath.Dir(binary(t)) + ":/usr/bin:/bin", "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"XDG_DATA_HOME=" + home, "TERM=xterm", "NODEWATCH_ETCD=" + etcd, "LANG=C.UTF-8"}
	cmd := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null", "new-session", "-d", "-x", "250", "-y", "120", "-c", dir, "--"}, argv...)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	s.keys(setup, "Enter")
	s.clear()
	return s
}

func (s *tmuxShell) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys types keys (tmux key names: Enter, Tab, C-u).
func (s *tmuxShell) keys(keys ...string) {
	s.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...)
}

// screen returns the pane's lines, without trailing blanks.
func (s *tmuxShell) screen() []string {
	var lines []string
	for _, l := range strings.Split(s.tmux("capture-pane", "-p", "-t", "0"), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// waitScreen waits until ok holds for the screen, and returns how long
// that took.
func (s *tmuxShell) waitScreen(ok func([]string) bool) time.Duration {
	s.t.Helper()
	start := time.Now()
	var lines []string
	for time.Since(start) < testkit.Timeout {
		if lines = s.screen(); ok(lines) {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("the screen never became what was expected:\n%s", strings.Join(lines, "\n"))
	return 0
}

// offered returns the candidates the shell lists under the line where
// line was typed: the words up to the next prompt.
func offered(screen []string, line string) []string {
	var words []string
	for i, l := range screen {
		if strings.HasPrefix(l, "$ "+strings.TrimRight(line, " ")) {
			for _, c := range screen[i+1:] {
				if strings.HasPrefix(c, "$ ") {
					break
				}
				for _, w := range strings.Fields(c) {
					// --flag=VALUE: fish and zsh show the whole word (fish
					// with the start cut: …-flag=VALUE), bash the value.
					if _, v, ok := strings.Cut(w, "="); ok {
						w = v
					}
					words = append(words, w)
				}
			}
			break
		}
	}
	slices.Sort(words)
	return words
}

// complete types line, then TAB, and returns what the shell lists once
// it lists want, and how long that took from the TAB.
func (s *tmuxShell) complete(line string, want []string) ([]string, time.Duration) {
	s.t.Helper()
	s.keys("-l", line)
	s.waitScreen(func(lines []string) bool {
		return len(lines) > 0 && lines[len(lines)-1] == "$ "+strings.TrimRight(line, " ")
	})
	s.keys("Tab")
	var got []string
	took := s.waitScreen(func(lines []string) bool {
		got = offered(lines, line)
		return len(got) >= len(want)
	})
	s.clear()
	return got, took
}

// clear empties the line and the screen with the line editor's own keys
// (end of line, kill to its start, clear screen), which the shell reads
// in order, and waits for the bare prompt.
func (s *tmuxShell) clear() {
	s.t.Helper()
	s.keys("C-e", "C-u", "C-l")
	s.waitScreen(func(lines []string) bool { return len(lines) == 1 && lines[0] == "$" })
}

// TestCompletionShells: in real bash, zsh and fish on a pseudo-terminal,
// TAB lists exactly the candidates nodewatch's definition has, within a
// second: flag values (-o, --value, --mgmt, sim --format), completion's
// shells, files for a file flag, and the flags after `key --` and `node
// --` with etcd reachable (where completion once ran a watch, and hung).
func TestCompletionShells(t *testing.T) {
	t.Parallel()
	etcd, _ := etcdtest.StartWith(t)
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "cert.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flagsOf := func(name string) []string {
		var names []string
		for _, f := range newApp(&env{}).Command(name).Flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, "--"+n)
				}
			}
		}
		slices.Sort(names)
		return names
	}
	cases := []struct {
		line string
		want []string
	}{
		{"nodewatch key -o ", []string{"json", "pretty", "table", "text"}},
		{"nodewatch key --value ", []string{"auto", "base64", "gob", "json", "query", "text"}},
		{"nodewatch key --mgmt ", []string{"deploy", "exported", "scheduler", "strings"}},
		{"nodewatch sim --format ", []string{"binary", "json"}},
		{"nodewatch completion ", []string{"bash", "fish", "zsh"}},
		{"nodewatch nodes --cacert ", []string{"ca.pem", "cert.pem"}},
		{"nodewatch nodes --cacert=", []string{"ca.pem", "cert.pem"}},
		{"nodewatch key --output=", []string{"json", "pretty", "table", "text"}},
		{"nodewatch key --", flagsOf("key")},
		{"nodewatch node --", flagsOf("node")},
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := startShell(t, shell, etcd, dir)
			for _, c := range cases {
				got, took := s.complete(c.line, c.want)
				if took > time.Second {
					got, took = s.complete(c.line, c.want) // once more: a loaded machine
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("%s<TAB>: offered %q, want %q", c.line, got, c.want)
				}
				if took > time.Second {
					t.Errorf("%s<TAB>: the candidates took %v", c.line, took)
				}
			}
		})
	}
}
