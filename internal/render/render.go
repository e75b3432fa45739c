// Package render keeps files in step with what is watched, the way confd
// and consul-template do (--render PROGRAM --to FILE): a jq program makes
// the file's content out of the view, the array of every current object,
// and the file is replaced when that content changes, an optional
// --check approving it first and an optional --reload telling the program
// that reads it afterwards. It exists because what reads such files
// (nginx, haproxy, a hosts file, a Prometheus target list) cannot watch
// etcd or the Curator itself, and must never read half a file.
//
// What it guarantees: a file is only ever replaced whole, by the rename of
// a temporary file beside it that was written and synced first (and its
// directory synced after), so that a reader, or a crash or a SIGKILL at
// any moment, sees the old content or the new, never a mix; it is written
// only when its bytes would change, keeping its mode and owner; a --check
// that fails leaves it as it was; --reload runs once after a Render that
// replaced anything, and is owed, across calls, until it succeeds.
package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodewatch/nodewatch/internal/handler"
	"github.com/nodewatch/nodewatch/internal/jq"
)

// Target is one --render PROGRAM --to FILE pair.
type Target struct {
	// Program makes the file's content out of the view: its outputs, each
	// on a line of its own, as `jq -r` prints them (a string as it is,
	// anything else as indented JSON, see appendJSON).
	Program *jq.Program
	// To is the file, as the user named it. A symbolic link is followed:
	// its target is replaced, the link is left as it is.
	To string
}

// Renderer renders its Targets, and runs Check and Reload. Set its fields
// before the first Render and leave them be after. Render may be called
// from several goroutines: the calls run one at a time.
type Renderer struct {
	Targets []Target
	// Check, if set, approves a new content before it replaces a file:
	// run as `/bin/sh -c Check sh TEMP` with TEMP, the path of the
	// temporary file that holds it, in $1 and NODEWATCH_RENDER_FILE, and
	// the file's --to in NODEWATCH_RENDER_TO (on Windows as `cmd.exe /d
	// /s /c "Check"`, which has no $1). A failure (an exit status other
	// than 0, a timeout) leaves the file as it was and is reported, with
	// what Check printed, through Logf; it is not an error of Render.
	Check string
	// Reload, if set, runs once after a Render that replaced at least one
	// file, as `/bin/sh -c Reload sh FILE…`: the --to of every file
	// replaced since the last Reload that succeeded in its positional
	// parameters (not on Windows), and NODEWATCH_ATTEMPT=attempt. A
	// failure is Render's error, and the reload is owed: the next Render
	// runs it, whether or not it replaces anything.
	Reload string
	// Timeout > 0 bounds each run of Check or Reload (their process group
	// gets SIGTERM, then Grace later SIGKILL); 0 is none.
	Timeout time.Duration
	// Grace: see handler.DefaultGrace; 0 means the default.
	Grace time.Duration
	// Strict makes a program that fails an error of Render (after every
	// target had its turn) instead of a warning.
	Strict bool
	// Logf receives warnings, rate-limited (see ReportEvery), without a
	// trailing newline: one line each, but for a --check's refusal, which
	// has what the check printed on the lines after. nil discards them.
	Logf func(format string, args ...any)
	// Stdout and Stderr receive Reload's output; nil discards it. Check's
	// output is kept for its failure's report instead.
	Stdout, Stderr io.Writer

	// now is the clock of the reports (time.Now when nil); a test hook.
	now func() time.Time

	mu      sync.Mutex // serializes Render; guards what follows
	cleaned bool       // the stale temporary files were removed
	owed    []string   // files replaced since the last Reload that succeeded
	// behind: the last Render left a file as it was that its program
	// would change (the program failed, or Check refused)
	behind  bool
	reports reporter
	out     []byte // the content being rendered
	onDisk  []byte // a file's content, read to compare
}

// Validate checks what the caller could get wrong, before anything runs:
// every target has a program and a file, which is a regular file or none
// yet, in a directory that exists; no two targets name the same file
// (also through symbolic links); Check and Reload, when set, are not
// blank. Its errors name the flag; the caller reports them as usage
// errors.
func (r *Renderer) Validate() error {
	seen := make(map[string]string, len(r.Targets))
	for _, t := range r.Targets {
		switch {
		case t.To == "":
			return errors.New("--to: want a file")
		case t.Program == nil:
			return fmt.Errorf("--to %s: no --render program for it", t.To)
		}
		key, _, err := resolve(t.To)
		if err != nil {
			return fmt.Errorf("--to %s: %w", t.To, err)
		}
		if fi, err := os.Stat(filepath.Dir(key)); err != nil || !fi.IsDir() {
			return fmt.Errorf("--to %s: no directory %s to write it in", t.To, filepath.Dir(key))
		}
		if abs, err := filepath.Abs(key); err == nil {
			key = abs
		}
		if other, ok := seen[key]; ok {
			if other == t.To {
				return fmt.Errorf("--to %s: given twice", t.To)
			}
			return fmt.Errorf("--to %s: the same file as --to %s", t.To, other)
		}
		seen[key] = t.To
	}
	for _, c := range []struct{ flag, command string }{{"--check", r.Check}, {"--reload", r.Reload}} {
		if c.command != "" && strings.TrimSpace(c.command) == "" {
			return fmt.Errorf("%s: want a command", c.flag)
		}
	}
	return nil
}

// Render brings every target's file in step with view (the array of the
// current objects in id order, or one object, or nil): it runs each
// target's program over view and replaces the file when the content
// differs from what it holds; then, if any file was replaced, or a reload
// is owed, it runs Reload. attempt counts the calls for one view from 1,
// as the --exec handler's runs (the caller retries a failed Render with
// backoff).
//
// The first Render of a Renderer first removes the temporary files that
// an earlier run, killed while it wrote them, left beside the targets.
//
// A program that fails, and a Check that refuses a content, leave their
// file as it was and are warnings (Strict makes the former errors). Render
// returns an error when a file cannot be written or replaced, and when
// Reload fails; every target had its turn before. When ctx ends, Render
// stops where it is (a running Check or Reload gets the signal that ended
// ctx, see handler.Signal), no file is left half-replaced, and it returns
// ctx's error.
func (r *Renderer) Render(ctx context.Context, view any, attempt int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reports.logf == nil {
		r.reports = reporter{logf: r.logf, now: r.clock, every: ReportEvery}
	}
	if !r.cleaned {
		r.clean()
		r.cleaned = true
	}
	var errs []error
	r.behind = false
	for i := range r.Targets {
		t := &r.Targets[i]
		replaced, err := r.render(ctx, t, view)
		if replaced && r.Reload != "" && !slices.Contains(r.owed, t.To) {
			r.owed = append(r.owed, t.To)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(r.owed) > 0 {
		if err := r.reload(ctx, attempt); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// InStep reports whether the last Render left every file holding what
// its program made of the view: no program failed and Check refused
// nothing (--once ends with a failure otherwise).
func (r *Renderer) InStep() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.behind
}

// render brings t's file in step with view, and reports whether it
// replaced it.
func (r *Renderer) render(ctx context.Context, t *Target, view any) (bool, error) {
	outs, err := t.Program.Run(ctx, view)
	if err == nil {
		r.out, err = appendOutputs(r.out[:0], outs)
	}
	failed := what{"program", t.To}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if r.Strict {
			return false, fmt.Errorf("--to %s: %w", t.To, err)
		}
		r.reports.fail(failed, fmt.Sprintf("--to %s: %v; the file is left as it was", t.To, err))
		r.behind = true
		return false, nil
	}
	r.reports.ok(failed, fmt.Sprintf("--to %s: the program succeeds again", t.To))

	path, old, err := resolve(t.To)
	if err != nil {
		return false, fmt.Errorf("--to %s: %w", t.To, err)
	}
	if old != nil {
		same, scratch, err := holds(path, old.Size(), r.out, r.onDisk)
		r.onDisk = scratch
		if err != nil {
			return false, fmt.Errorf("--to %s: read it: %w", t.To, err)
		}
		if same {
			return false, nil
		}
	}
	return r.replace(ctx, t, path, old)
}

// replace writes r.out beside path, has Check approve it, and renames it
// over path; it reports whether it did.
func (r *Renderer) replace(ctx context.Context, t *Target, path string, old fs.FileInfo) (bool, error) {
	temp, warning, err := writeTemp(path, old, r.out)
	if err != nil {
		return false, fmt.Errorf("--to %s: write it: %w", t.To, err)
	}
	owner := what{"owner", t.To}
	if warning != nil {
		r.reports.fail(owner, fmt.Sprintf("--to %s: %v", t.To, warning))
	} else {
		r.reports.ok(owner, fmt.Sprintf("--to %s: its owner is kept again", t.To))
	}
	if r.Check != "" {
		if ok, err := r.check(ctx, t, temp); !ok {
			os.Remove(temp)
			r.behind = true
			return false, err
		}
	}
	renamed, err := replace(temp, path)
	if !renamed {
		os.Remove(temp)
	}
	if err != nil {
		return renamed, fmt.Errorf("--to %s: replace it: %w", t.To, err)
	}
	return true, nil
}

// check runs Check over the new content in temp; a refusal is reported,
// not returned: only ctx's end is an error.
func (r *Renderer) check(ctx context.Context, t *Target, temp string) (bool, error) {
	if abs, err := filepath.Abs(temp); err == nil {
		temp = abs
	}
	out := &tail{max: checkOutputMax}
	h := &handler.Handler{
		Command: r.Check,
		Args:    []string{temp},
		Timeout: r.Timeout,
		Grace:   r.Grace,
		Stdout:  out,
		Stderr:  out,
	}
	err := h.RunEnv(ctx, nil, CheckEnv(temp, t.To))
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	refused := what{"check", t.To}
	if err != nil {
		msg := fmt.Sprintf("--to %s: --check refused the new content (%v); the file is left as it was", t.To, err)
		if s := out.String(); s != "" {
			msg += ". It printed:\n" + s
		}
		r.reports.fail(refused, msg)
		return false, nil
	}
	r.reports.ok(refused, fmt.Sprintf("--to %s: --check approves again", t.To))
	return true, nil
}

// CheckEnv is the environment that Check gets, beside the inherited one:
// the temporary file that holds the new content, and the file it is for.
func CheckEnv(temp, to string) []string {
	return []string{"NODEWATCH_RENDER_FILE=" + temp, "NODEWATCH_RENDER_TO=" + to}
}

// reload runs Reload for the files it is owed for.
func (r *Renderer) reload(ctx context.Context, attempt int) error {
	h := &handler.Handler{
		Command: r.Reload,
		Args:    r.owed,
		Timeout: r.Timeout,
		Grace:   r.Grace,
		Stdout:  r.Stdout,
		Stderr:  r.Stderr,
	}
	if err := h.RunEnv(ctx, nil, []string{"NODEWATCH_ATTEMPT=" + strconv.Itoa(attempt)}); err != nil {
		return fmt.Errorf("--reload: %w", err)
	}
	r.owed = r.owed[:0]
	return nil
}

// clean removes the temporary files that a killed run left beside the
// targets; what it removed, and what it could not, it says through Logf.
func (r *Renderer) clean() {
	for _, t := range r.Targets {
		removed, err := cleanTemps(t.To)
		for _, name := range removed {
			r.logf("--to %s: removed %s, which an earlier run left half-written", t.To, name)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.logf("--to %s: remove what an earlier run left half-written: %v", t.To, err)
		}
	}
}

func (r *Renderer) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

func (r *Renderer) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}
