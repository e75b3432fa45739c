package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// These tests hold docs/reference.md to the code, so that its tables of
// exit codes and of environment variables cannot drift from what
// nodewatch does.

// referenceTable returns the rows of the first table after the heading
// (a line of docs/reference.md) as cells, without the header row.
func referenceTable(t *testing.T, heading string) [][]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/reference.md has no %q", heading)
	}
	var rows [][]string
	for _, l := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(l, "|---"):
		case strings.HasPrefix(l, "|"):
			rows = append(rows, strings.Split(strings.Trim(l, "|"), " | "))
		case len(rows) > 0:
			return rows[1:]
		}
	}
	t.Fatalf("docs/reference.md: no table after %q", heading)
	return nil
}

// TestReferenceExitCodes: the table of "## Exit codes" lists the codes of
// exitTable, in its order.
func TestReferenceExitCodes(t *testing.T) {
	var doc, code []int
	for _, r := range referenceTable(t, "## Exit codes") {
		n, err := strconv.Atoi(strings.TrimSpace(r[0]))
		if err != nil {
			t.Fatalf("exit codes: row %q: %v", r, err)
		}
		doc = append(doc, n)
	}
	for _, r := range exitTable() {
		code = append(code, r.code)
	}
	if !slices.Equal(doc, code) {
		t.Errorf("docs/reference.md lists exit codes %v; exit.go has %v", doc, code)
	}
}

// envRead matches a variable read by name in Go source.
var envRead = regexp.MustCompile(`(?:Getenv|getenv|LookupEnv)\("([A-Za-z_][A-Za-z0-9_]*)"\)`)

// notOurs are variables the code reads that are the platform's business,
// not nodewatch's, and are not documented as nodewatch's.
var notOurs = map[string]string{
	"HOME":    "~/.config when XDG_CONFIG_HOME is unset, as everywhere",
	"ComSpec": "Windows' shell, which runs --exec's command",
}

// codeEnvVars returns the variables nodewatch reads: the flags' (EnvVars)
// and those its source (not tests, not test kits, not tools) reads by
// name, with where.
func codeEnvVars(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, c := range newApp(&env{}).Commands {
		for _, f := range c.Flags {
			if df, ok := f.(cli.DocGenerationFlag); ok {
				for _, v := range df.GetEnvVars() {
					vars[v] = "--" + f.Names()[0]
				}
			}
		}
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testkit" || name == "tools" || name == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range envRead.FindAllStringSubmatch(string(src), -1) {
			if _, ok := notOurs[m[1]]; !ok {
				vars[m[1]] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// TestReferenceEnvironment: "## Environment variables" lists every
// variable nodewatch reads and none it does not; so does the man page's
// ENVIRONMENT.
func TestReferenceEnvironment(t *testing.T) {
	code := codeEnvVars(t)
	for _, v := range []string{"NODEWATCH_ETCD", "NODEWATCH_METROCTL_CONFIG", "NODEWATCH_PASSWORD", "NODEWATCH_FAST", "NO_COLOR", "TERM"} {
		if code[v] == "" {
			t.Errorf("the scan of the code did not find %s", v) // the scan itself is broken
		}
	}
	doc := map[string]bool{}
	backquoted := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)`")
	for _, r := range referenceTable(t, "## Environment variables") {
		for _, m := range backquoted.FindAllStringSubmatch(r[0], -1) {
			doc[m[1]] = true
		}
	}
	for v, where := range code {
		if !doc[v] {
			t.Errorf("docs/reference.md, Environment variables: no row for %s (read by %s)", v, where)
		}
	}
	for v := range doc {
		if code[v] == "" {
			t.Errorf("docs/reference.md, Environment variables: %s is read nowhere in the code", v)
		}
	}
	var man strings.Builder
	e := &env{stdin: strings.NewReader(""), stdout: &man, stderr: &man, getenv: func(string) string { return "" }}
	if code := runEnv(t.Context(), e, []string{"man"}); code != exitOK {
		t.Fatalf("nodewatch man: exit %d: %s", code, man.String())
	}
	_, environment, _ := strings.Cut(man.String(), ".SH ENVIRONMENT\n")
	environment, _, _ = strings.Cut(environment, "\n.SH ")
	environment = strings.NewReplacer(`\fB`, " ", `\fR`, " ", `\fI`, " ").Replace(environment)
	for v := range code {
		if !regexp.MustCompile(`\b` + v + `\b`).MatchString(environment) {
			t.Errorf("the man page's ENVIRONMENT does not name %s", v)
		}
	}
}
