//go:build unix

package main

// TestCLI runs the command-line cases in testdata/cli/*.txtar (at the
// repository's root): each runs nodewatch in-process through runEnv and
// compares stdout, stderr and the exit code exactly.
//
// A file is txtar: a comment, then sections "-- NAME --". A section
// "-- case TITLE --" starts a case; its lines are
//
//	args: key /x --count -1    the command line, split as a shell would
//	                           (quotes '…' and "…", \ escapes; \n in "…"
//	                           is a newline); several args: lines are joined
//	exit: 2                    the exit code
//	# …                        a comment
//
// and the sections up to the next case belong to it:
//
//	-- stdout --, -- stderr --  what the run prints (none: nothing)
//	-- stdin --                 what it reads
//	-- env --                   NAME=VALUE lines: all the run's getenv sees
//	                            (not the variables urfave/cli reads from
//	                            the process for flags, NODEWATCH_ETCD…:
//	                            refused, as the cases run in parallel)
//	-- file PATH --             a file written under $DIR first
//	-- etcd --                  records loaded into a fresh embedded etcd
//	                            before the run, one "put KEY VALUE" (VALUE
//	                            the rest of the line) or "del KEY" a line,
//	                            and # comments
//	-- script --                applied while the run goes on: put and del
//	                            as above, "wait N" (until stdout has N
//	                            lines), "wait-stderr N", "interrupt" (the
//	                            run's context is cancelled: exit 130)
//
// Placeholders in args and env: $ETCD (the case's etcd; an etcd or
// script section or $ETCD starts one), $CURATOR (a `nodewatch serve` over
// that etcd, started in-process) and $DIR (the case's directory). In
// what a run printed, their values are replaced by the placeholders
// before the comparison, and so is $GO (e.g. "go1.26.8 linux/amd64").
//
// Wildcards, only for what differs from run to run: in an expected stdout
// or stderr, {{time}} matches -o text's time of day (15:04:05), {{ts}}
// --timestamps' RFC 3339 time (and serve's log times), {{port}} a port
// the kernel chose, {{duration}} a duration measured, and
// {{reconnects}}, a line of its own, any number of "…; reconnecting to
// ADDR in D" lines (how many a timeout lets through, and D, are random).
//
// go test ./cmd/nodewatch -run TestCLI -update-cli rewrites the expected
// sections (and exit lines) from what the runs printed: review the diff.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

var updateCLI = flag.Bool("update-cli", false, "rewrite the expected output of the cases in testdata/cli")

// cliCaseDir is where the cases live, from this package's directory.
const cliCaseDir = "../../testdata/cli"

// cliSection is one "-- NAME --" section of a txtar file.
type cliSection struct{ name, data string }

// cliCase is one case of a file.
type cliCase struct {
	title    string
	header   []string // the case section's lines
	args     []string
	exit     int
	sections map[string]string // stdout, stderr, stdin, env, etcd, script
	files    []cliSection      // file PATH sections
}

// parseTxtar splits a txtar file into its comment and sections.
func parseTxtar(data string) (comment string, sections []cliSection) {
	lines := strings.SplitAfter(data, "\n")
	var cur *cliSection
	var b strings.Builder
	flush := func() {
		if cur == nil {
			comment = b.String()
		} else {
			cur.data = b.String()
			sections = append(sections, *cur)
		}
		b.Reset()
	}
	for _, l := range lines {
		t := strings.TrimSuffix(l, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) >= 6 {
			flush()
			cur = &cliSection{name: strings.TrimSpace(t[3 : len(t)-3])}
			continue
		}
		b.WriteString(l)
	}
	flush()
	return comment, sections
}

// loadCLICases reads every case of one file.
func loadCLICases(path string) (comment string, cases []*cliCase, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	comment, sections := parseTxtar(string(data))
	for _, s := range sections {
		if title, ok := strings.CutPrefix(s.name, "case "); ok {
			for _, o := range cases {
				if o.title == title {
					return "", nil, fmt.Errorf("%s: two cases named %q", path, title)
				}
			}
			c := &cliCase{title: title, sections: map[string]string{}, exit: -1}
			c.header = strings.Split(strings.TrimSuffix(s.data, "\n"), "\n")
			for _, l := range c.header {
				key, value, _ := strings.Cut(l, ":")
				value = strings.TrimSpace(value)
				switch {
				case strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "":
				case key == "args":
					args, err := splitArgs(value)
					if err != nil {
						return "", nil, fmt.Errorf("%s: case %s: %v", path, title, err)
					}
					c.args = append(c.args, args...)
				case key == "exit":
					if c.exit, err = strconv.Atoi(value); err != nil {
						return "", nil, fmt.Errorf("%s: case %s: %v", path, title, err)
					}
				default:
					return "", nil, fmt.Errorf("%s: case %s: unknown line %q", path, title, l)
				}
			}
			if c.exit < 0 || len(c.args) == 0 && !strings.Contains(s.data, "args:") {
				return "", nil, fmt.Errorf("%s: case %s: want args: and exit: lines", path, title)
			}
			cases = append(cases, c)
			continue
		}
		if len(cases) == 0 {
			return "", nil, fmt.Errorf("%s: section %q before the first case", path, s.name)
		}
		c := cases[len(cases)-1]
		switch name, _ := strings.CutPrefix(s.name, "file "); {
		case name != s.name:
			c.files = append(c.files, cliSection{name, s.data})
		case slices.Contains([]string{"stdout", "stderr", "stdin", "env", "etcd", "script"}, s.name):
			c.sections[s.name] = s.data
		default:
			return "", nil, fmt.Errorf("%s: case %s: unknown section %q", path, c.title, s.name)
		}
	}
	return comment, cases, nil
}

// splitArgs splits a command line as a shell would: blanks separate
// words, '…' quotes literally, "…" and \ escape (and "\n" is a newline).
func splitArgs(s string) ([]string, error) {
	var args []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				args, inWord = append(args, w.String()), false
				w.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
					if s[i] == 'n' {
						w.WriteByte('\n')
						continue
					}
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, w.String())
	}
	return args, nil
}

// cliFiles returns the case files.
func cliFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(cliCaseDir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in %s: %v", cliCaseDir, err)
	}
	return files
}

func TestCLI(t *testing.T) {
	fromProcess := map[string]bool{} // what urfave/cli reads from the process itself
	for _, c := range newApp(&env{}).Commands {
		for _, f := range c.Flags {
			if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, v := range ev.GetEnvVars() {
					fromProcess[v] = true
				}
			}
		}
	}
	for _, path := range cliFiles(t) {
		comment, cases, err := loadCLICases(path)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]*cliResult, len(cases)) // nil: not run (-run)
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			for i, c := range cases {
				t.Run(c.title, func(t *testing.T) {
					t.Parallel()
					for _, kv := range strings.Split(c.sections["env"], "\n") {
						if name, _, _ := strings.Cut(kv, "="); fromProcess[name] {
							t.Fatalf("env: urfave/cli reads %s from the process, not from the run's env: give the flag instead", name)
						}
					}
					r := runCLICase(t, c)
					got[i] = &r
					checkCLICase(t, c, r)
				})
			}
		})
		if *updateCLI {
			if err := os.WriteFile(path, []byte(formatCLICases(comment, cases, got)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// cliResult is what one run printed, with placeholders for its
// endpoints, and how it ended.
type cliResult struct {
	stdout, stderr string
	exit           int
}

// runCLICase sets up what c needs and runs it.
func runCLICase(t *testing.T, c *cliCase) cliResult {
	dir := t.TempDir()
	for _, f := range c.files {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	line := strings.Join(c.args, "\x00")
	vars := [][2]string{{"$DIR", dir}}
	var etcd *clientv3.Client
	if strings.Contains(line, "$ETCD") || strings.Contains(line, "$CURATOR") || c.sections["etcd"] != "" || c.sections["script"] != "" {
		ep := etcdtest.Start(t)
		etcd = etcdtest.Client(t, ep)
		for _, op := range strings.Split(c.sections["etcd"], "\n") {
			if err := cliOp(etcd, op); err != nil {
				t.Fatalf("etcd: %v", err)
			}
		}
		vars = append(vars, [2]string{"$ETCD", ep})
		if strings.Contains(line, "$CURATOR") {
			vars = append(vars, [2]string{"$CURATOR", cliServe(t, ep)})
		}
	}
	expand := func(s string) string {
		for _, v := range vars {
			s = strings.ReplaceAll(s, v[0], v[1])
		}
		return s
	}
	args := make([]string, len(c.args))
	for i, a := range c.args {
		args[i] = expand(a)
	}
	envVars := map[string]string{}
	for _, kv := range strings.Split(c.sections["env"], "\n") {
		if name, value, ok := strings.Cut(kv, "="); ok {
			envVars[name] = expand(value)
		}
	}
	const guard = time.Minute // a case ends by itself well before
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	stdout, stderr := &testkit.Buffer{}, &testkit.Buffer{}
	e := &env{stdin: strings.NewReader(c.sections["stdin"]), stdout: stdout, stderr: stderr, getenv: func(k string) string { return envVars[k] }}
	done := make(chan struct{})
	scriptDone := make(chan error, 1)
	go func() { scriptDone <- cliScript(c.sections["script"], etcd, stdout, stderr, cancel, done) }()
	code := runEnv(ctx, e, args)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("nodewatch %s did not end within %v", strings.Join(c.args, " "), guard)
	}
	close(done)
	if err := <-scriptDone; err != nil {
		t.Errorf("script: %v", err)
	}
	// What varies from run to run is named as in args.
	slices.Reverse(vars) // the endpoints before $DIR, which may be a prefix of nothing else
	vars = append(vars, [2]string{"$GO", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH})
	normalize := func(s string) string {
		for _, v := range vars {
			s = strings.ReplaceAll(s, v[1], v[0])
		}
		return s
	}
	return cliResult{normalize(stdout.String()), normalize(stderr.String()), code}
}

// cliOp applies one line of an etcd or script section: put KEY VALUE or
// del KEY (blank lines and # comments do nothing).
func cliOp(c *clientv3.Client, op string) error {
	verb, rest, _ := strings.Cut(op, " ")
	if verb == "" || strings.HasPrefix(op, "#") {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	switch verb {
	case "put":
		key, value, _ := strings.Cut(rest, " ")
		_, err = c.Put(ctx, key, value)
	case "del":
		_, err = c.Delete(ctx, rest)
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	return err
}

// cliScript applies a script section while the run goes on, until it is
// done or the run ends (done closed).
func cliScript(script string, c *clientv3.Client, stdout, stderr *testkit.Buffer, interrupt func(), done <-chan struct{}) error {
	for _, op := range strings.Split(script, "\n") {
		verb, n, _ := strings.Cut(op, " ")
		switch verb {
		case "wait", "wait-stderr":
			b := stdout
			if verb == "wait-stderr" {
				b = stderr
			}
			want, err := strconv.Atoi(n)
			if err != nil {
				return fmt.Errorf("%q: %v", op, err)
			}
			// Until the run printed want lines, or ended first (its output
			// says how).
			if err := testkit.Poll(context.Background(), timeout, func() (bool, error) {
				select {
				case <-done:
					return true, nil
				default:
					return lines(b) >= want, nil
				}
			}); err != nil {
				return fmt.Errorf("%q: %w", op, err)
			}
		case "interrupt":
			interrupt()
		default:
			if err := cliOp(c, op); err != nil {
				return err
			}
		}
	}
	return nil
}

// cliServe runs `nodewatch serve` over etcd at ep until the test ends,
// and returns the address it serves on.
func cliServe(t *testing.T, ep string) string {
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &testkit.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- runEnv(ctx, &env{stdin: strings.NewReader(""), stdout: stderr, stderr: stderr, getenv: func(string) string { return "" }},
			[]string{"serve", "--etcd", ep, "--listen", "127.0.0.1:0"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	serving := regexp.MustCompile(`serving Curator Watch on ([^\s"]+)`)
	var addr string
	testkit.Eventually(t, func() error {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d: %s", code, stderr)
		default:
		}
		m := serving.FindStringSubmatch(stderr.String())
		if m == nil {
			return fmt.Errorf("serve not serving yet: %s", stderr)
		}
		addr = m[1]
		return nil
	})
	return addr
}

// checkCLICase compares what a run printed and how it ended with c.
func checkCLICase(t *testing.T, c *cliCase, got cliResult) {
	t.Helper()
	if got.exit != c.exit {
		t.Errorf("nodewatch %s: exit %d, want %d", strings.Join(c.args, " "), got.exit, c.exit)
	}
	for _, s := range []struct{ name, got string }{{"stdout", got.stdout}, {"stderr", got.stderr}} {
		if want := c.sections[s.name]; !cliMatch(want, s.got) {
			t.Errorf("nodewatch %s: %s differs (-want +got):\n%s", strings.Join(c.args, " "), s.name,
				cmp.Diff(strings.SplitAfter(want, "\n"), strings.SplitAfter(s.got, "\n")))
		}
	}
}

// cliWildcards are what may stand in an expected stdout or stderr for
// what differs from run to run: each matches its regexp.
var cliWildcards = map[string]string{
	"{{time}}":     `[0-9]{2}:[0-9]{2}:[0-9]{2}`,                    // -o text's time of day
	"{{ts}}":       `[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9:.]+Z`, // --timestamps
	"{{port}}":     `[0-9]+`,                                        // a port the kernel chose
	"{{duration}}": `[0-9.]+[a-zµ]+`,                                // a time.Duration measured
	// The reconnect lines logged while a run waits for a connection: how
	// many come within a timeout, and their delays, are random (jitter).
	"{{reconnects}}\n": `(?:nodewatch: [^\n]*; reconnecting to [^\n]* in [0-9.]+[a-zµ]+\n)*`,
}

var cliWildcard = regexp.MustCompile(`\{\{(?:time|ts|port|duration)\}\}|\{\{reconnects\}\}\n`)

// cliMatch reports whether got is want, with cliWildcards in want.
func cliMatch(want, got string) bool {
	if !cliWildcard.MatchString(want) {
		return want == got
	}
	re, last := `\A`, 0
	for _, m := range cliWildcard.FindAllStringIndex(want, -1) {
		re += regexp.QuoteMeta(want[last:m[0]]) + cliWildcards[want[m[0]:m[1]]]
		last = m[1]
	}
	return regexp.MustCompile(re + regexp.QuoteMeta(want[last:]) + `\z`).MatchString(got)
}

// formatCLICases writes the cases back, with what the runs printed.
func formatCLICases(comment string, cases []*cliCase, got []*cliResult) string {
	var b strings.Builder
	b.WriteString(comment)
	section := func(name, data string) {
		fmt.Fprintf(&b, "-- %s --\n%s", name, data)
	}
	for i, c := range cases {
		if got[i] == nil {
			got[i] = &cliResult{c.sections["stdout"], c.sections["stderr"], c.exit}
		}
		var header []string
		for _, l := range c.header {
			if strings.HasPrefix(l, "exit:") {
				l = "exit: " + strconv.Itoa(got[i].exit)
			}
			header = append(header, l)
		}
		section("case "+c.title, strings.Join(header, "\n")+"\n")
		for _, name := range []string{"env", "stdin"} {
			if data, ok := c.sections[name]; ok {
				section(name, data)
			}
		}
		for _, f := range c.files {
			section("file "+f.name, f.data)
		}
		for _, name := range []string{"etcd", "script"} {
			if data, ok := c.sections[name]; ok {
				section(name, data)
			}
		}
		for _, s := range []struct{ name, got string }{{"stdout", got[i].stdout}, {"stderr", got[i].stderr}} {
			if want := c.sections[s.name]; cliMatch(want, s.got) && want != "" {
				section(s.name, want) // with its wildcards
			} else if s.got != "" {
				section(s.name, s.got)
			}
		}
	}
	return b.String()
}

// lines counts the lines b holds.
func lines(b *testkit.Buffer) int { return bytes.Count(b.Bytes(), []byte("\n")) }

// TestCLICoversEveryFlag: every name of every flag of every command (and
// of nodewatch itself) appears in the args of a case of that command.
func TestCLICoversEveryFlag(t *testing.T) {
	used := map[string]map[string]bool{} // command (or "") → flag names given
	for _, path := range cliFiles(t) {
		_, cases, err := loadCLICases(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			cmd := ""
			if len(c.args) > 0 && !strings.HasPrefix(c.args[0], "-") {
				cmd = c.args[0]
			}
			if used[cmd] == nil {
				used[cmd] = map[string]bool{}
			}
			for _, a := range c.args {
				if a == "--" {
					break
				}
				if name, ok := strings.CutPrefix(a, "-"); ok && name != "" {
					name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
					used[cmd][name] = true
				}
			}
		}
	}
	app := newApp(&env{})
	check := func(cmd string, flags []cli.Flag) {
		for _, f := range flags {
			for _, n := range f.Names() {
				if !used[cmd][n] {
					dash := "--"
					if len(n) == 1 {
						dash = "-"
					}
					t.Errorf("no case in %s gives nodewatch %s%s%s", cliCaseDir, cmd, map[bool]string{true: " ", false: ""}[cmd != ""], dash+n)
				}
			}
		}
	}
	check("", app.Flags)
	for _, c := range app.Commands {
		check(c.Name, c.Flags)
	}
}
