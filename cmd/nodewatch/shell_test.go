//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
	if _, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command("groff", "-man", "-ww", "-z")
		cmd.Stdin = strings.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff -ww: %v\n%s", err, out)
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
