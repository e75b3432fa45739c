package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedFiles: the checked-in man page and completion scripts are
// what the command-line definition generates now (make generate).
func TestGeneratedFiles(t *testing.T) {
	t.Parallel()
	for _, g := range []struct {
		path string
		args []string
	}{
		{"docs/nodewatch.1", []string{"man"}},
		{"completions/nodewatch.fish", []string{"completion", "fish"}},
	} {
		stdout, stderr, code := runSync(t, g.args...)
		if code != 0 {
			t.Fatalf("nodewatch %s: exit %d: %s", strings.Join(g.args, " "), code, stderr)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", g.path))
		if err != nil {
			t.Fatal(err)
		}
		if stdout != string(want) {
			t.Errorf("%s is stale: run make generate", g.path)
		}
	}
}

// TestManPage: the man page renders without a warning, and says what
// --help says: a section per command with its description and examples,
// flags as they are typed (--arg NAME VALUE, -o FORMAT), EXIT STATUS and
// ENVIRONMENT.
func TestManPage(t *testing.T) {
	t.Parallel()
	page, _, _ := runSync(t, "man")
	for _, want := range []string{`.TH NODEWATCH 1`, "Exit codes", `\fB\-\-filter\fR \fIEXPR\fR`,
		`\fB\-\-arg\fR \fINAME VALUE\fR`, `\fB\-\-output\fR, \fB\-o\fR \fIFORMAT\fR`, `\fB\-\-prefix\fR`, `\fB\-\-dev\fR`,
		`.SH "NODEWATCH NODES"`, `.SH "NODEWATCH KEY"`, `.SH "NODEWATCH COMPLETION"`, `.SH "NODEWATCH VERSION"`,
		`nodewatch nodes \-\-curator 10.0.0.1:7835`, // an example
		".SH EXIT STATUS\n", ".TP\n\\fB124 (nodes, node, key)\\fR\n", ".SH ENVIRONMENT\n", "\\fBNODEWATCH_ETCD\\fR\n\\-\\-etcd, for key, serve, sim\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	for _, bad := range []string{`=""`, ".SH help"} {
		if strings.Contains(page, bad) {
			t.Errorf("man page has %q", bad)
		}
	}
	if _, err := exec.LookPath("man"); err == nil {
		cmd := exec.Command("man", "--warnings", "-l", "-")
		cmd.Stdin = strings.NewReader(page)
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "NAME") || !strings.Contains(string(out), "follow cluster state") || stderr.Len() > 0 {
			t.Errorf("man -l: %v\n%s\nwarnings: %s", err, out, stderr.String())
		}
	}
}

// shell runs script in the shell named by argv[0] with the built
// nodewatch first on PATH, and returns its output lines. The test is
// skipped where the shell is not installed (.ci/run installs it).
func shell(t *testing.T, script string, argv ...string) []string {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (.ci/run installs it)", argv[0])
		}
		t.Skipf("%s is not installed (.ci/run installs it)", argv[0])
	}
	cmd := exec.Command(argv[0], append(argv[1:], script)...)
	cmd.Env = []string{"PATH=" + filepath.Dir(binary(t)) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", argv[0], err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// candidates returns the lines between the marker lines "[name]" and the
// next marker, the first word of each (fish adds a description after a
// tab).
func candidates(lines []string, name string) []string {
	var out []string
	in := false
	for _, l := range lines {
		if strings.HasPrefix(l, "[") {
			in = l == "["+name+"]"
			continue
		}
		if in && l != "" {
			out = append(out, strings.Fields(l)[0])
		}
	}
	return out
}

// checkCandidates checks what a shell offered at three places: after
// "nodewatch ke", after "nodewatch key --pre" and after "nodewatch nodes
// --cha".
func checkCandidates(t *testing.T, lines []string, exact bool) {
	t.Helper()
	for _, c := range []struct{ at, want string }{
		{"command", "key"}, {"flag", "--prefix"}, {"nodes-flag", "--changes-only"},
	} {
		got := candidates(lines, c.at)
		if !slices.Contains(got, c.want) || exact && len(got) != 1 {
			t.Errorf("completing %s: got %q, want %q", c.at, got, c.want)
		}
	}
	if t.Failed() {
		t.Logf("shell output:\n%s", strings.Join(lines, "\n"))
	}
}

// TestCompletionBash: bash's completion function, as `completion bash`
// defines it, completes commands and flags by asking the binary.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	lines := shell(t, `
source <(nodewatch completion bash)
complete -p nodewatch
at() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _nodewatch_complete; printf '%s\n' "${COMPREPLY[@]}"; }
echo "[command]"; at nodewatch ke
echo "[flag]"; at nodewatch key --pre
echo "[nodes-flag]"; at nodewatch nodes --cha
`, "bash", "-c")
	if !strings.Contains(lines[0], "_nodewatch_complete") {
		t.Errorf("complete -p nodewatch: %q", lines[0])
	}
	checkCandidates(t, lines, true)
}

// TestCompletionZsh: zsh's completion function, as `completion zsh`
// defines it, offers commands and flags from the binary. The completion
// system's _describe and compdef, which need an interactive line editor,
// are replaced by functions that print what they are given (zsh filters by
// the prefix itself, so every command or flag of the level is offered).
func TestCompletionZsh(t *testing.T) {
	t.Parallel()
	lines := shell(t, `
compdef() { print -r -- "compdef $*" }
_describe() { print -rl -- "${(@P)2}" }
source <(nodewatch completion zsh)
echo "[command]"; words=(nodewatch ke); _nodewatch
echo "[flag]"; words=(nodewatch key --pre); _nodewatch
echo "[nodes-flag]"; words=(nodewatch nodes --cha); _nodewatch
# Installed in $fpath and autoloaded, the first call completes too.
dir=$(mktemp -d); nodewatch completion zsh > $dir/_nodewatch
unfunction _nodewatch; fpath=($dir $fpath); autoload -U _nodewatch
echo "[autoload]"; words=(nodewatch ke); _nodewatch
rm -r $dir
`, "zsh", "-f", "-c")
	if lines[0] != "compdef _nodewatch nodewatch" {
		t.Errorf("the script registers %q, want compdef _nodewatch nodewatch", lines[0])
	}
	checkCandidates(t, lines, false)
	if got := candidates(lines, "autoload"); !slices.Contains(got, "key") {
		t.Errorf("autoloaded from $fpath, the first call offered %q", got)
	}
}

// TestCompletionFish: fish's own completion engine (complete -C), with the
// generated script loaded.
func TestCompletionFish(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("fish test runs on Linux")
	}
	lines := shell(t, `
nodewatch completion fish | source
echo "[command]"; complete -C "nodewatch ke"
echo "[flag]"; complete -C "nodewatch key --pre"
echo "[nodes-flag]"; complete -C "nodewatch nodes --cha"
echo "[file]"; complete -C "nodewatch nodes --cacert shell_te"
`, "fish", "--no-config", "-c")
	checkCandidates(t, lines, true)
	if got := candidates(lines, "file"); !slices.Contains(got, "shell_test.go") {
		t.Errorf("completing the file of --cacert: got %q", got)
	}
}
