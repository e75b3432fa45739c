package watch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/near"
)

// Hints tell the person at the terminal why a run found nothing, where
// it would otherwise succeed in silence: a --filter that names a member
// no object has, a key that does not exist while keys live under it, a
// node id that is not there. They go to Logf as "hint: …", once, after
// the first synced batch, and only when the view is empty then; they
// change nothing else (not the output, not how the run ends). A run
// with ChangesOnly gets them too: its initial state is built as any
// other's, and a silent wait for changes to a key that does not exist
// would go on for ever.

// hintTimeout bounds what a Hinter may take: a hint is not worth a slow
// end.
const hintTimeout = 2 * time.Second

// hintSample is how many of the objects the filter turned down in the
// first batch a run keeps for the filter's hint.
const hintSample = 100

// Hinter is a source that can say, once, why what it follows is not
// there (Options.Hinter).
type Hinter interface {
	// Hint looks around what the source follows, when the view is
	// empty after the initial state and no filter turned anything
	// down, and returns hints for a person, a line each (none: nothing
	// to say): what exists nearby. It makes few, cheap requests, and
	// returns when ctx ends. Errors are not the run's: Run drops them.
	Hint(ctx context.Context) ([]string, error)
}

// hints is what a run gathers for its hint, until the first synced
// batch (see hint).
type hints struct {
	done bool
	// declined counts the objects the filter turned down, sample holds
	// the first hintSample of them (as trees: the follower may free the
	// objects).
	declined int
	sample   []any
}

// decline notes obj, which the filter turned down.
func (h *hints) decline(obj any) {
	if h.done {
		return
	}
	h.declined++
	if len(h.sample) < hintSample {
		h.sample = append(h.sample, jsondoc.TreeOf(obj))
	}
}

// hint gives the run's hint, once: after the first synced batch, with
// empty the view it left (see Hinter).
func (r *run) hint(empty bool) {
	h := &r.hints
	if h.done {
		return
	}
	sample, declined := h.sample, h.declined
	*h = hints{done: true}
	if !empty || r.o.Logf == nil {
		return
	}
	var msgs []string
	switch {
	case r.o.Filter != nil && declined > 0:
		if msg := filterHint(r.o.Filter, sample, declined); msg != "" {
			msgs = append(msgs, msg)
		}
	case r.o.Hinter != nil:
		ctx, cancel := context.WithTimeout(r.ctx, hintTimeout)
		defer cancel()
		msgs, _ = r.o.Hinter.Hint(ctx)
	}
	for _, msg := range msgs {
		r.o.Logf("hint: %s", msg)
	}
}

// filterHint names the first member that filter reads and that none of
// objects (the first of the n that filter turned down) has, and the
// closest one they have: "" when they have every one.
func filterHint(filter *jq.Program, objects []any, n int) string {
	for _, path := range filter.Paths() {
		at, names, ok := missing(path, objects)
		if !ok {
			continue
		}
		msg := fmt.Sprintf("%s matched none of the %d objects: none has %s", filter.Name(), n, pathString(path[:at+1]))
		they := "they have"
		if n == 1 {
			msg = fmt.Sprintf("%s did not match the one object: it has no %s", filter.Name(), pathString(path[:at+1]))
			they = "it has"
		}
		if f := near.Field(path[at], names); f != "" {
			return msg + fmt.Sprintf(" (did you mean %s?)", pathString(append(slices.Clone(path[:at]), f)))
		}
		return msg + " (" + they + " " + membersString(path[:at], names) + ")"
	}
	return ""
}

// missing finds the first member of path that none of objects has,
// where some have the members before it as an object: its index, and
// the names of the members those objects have there, sorted. ok is
// false when objects have every member of path, or none has an object
// where the missing one would be (a type error, which a warning tells).
func missing(path []string, objects []any) (at int, names []string, ok bool) {
	level := objects
	for at, name := range path {
		var next []any
		seen := map[string]bool{}
		for _, v := range level {
			m, isObject := v.(map[string]any)
			if !isObject {
				continue
			}
			for k := range m {
				seen[k] = true
			}
			if child, has := m[name]; has {
				next = append(next, child)
			}
		}
		if len(seen) == 0 && len(next) == 0 {
			return 0, nil, false
		}
		if len(next) == 0 {
			for k := range seen {
				names = append(names, k)
			}
			slices.Sort(names)
			return at, names, true
		}
		level = next
	}
	return 0, nil, false
}

// maxMembers is how many members a hint lists when none is close.
const maxMembers = 8

// membersString lists the members names under the path parent, as jq
// writes them: ".id, .roles, .state".
func membersString(parent []string, names []string) string {
	var s []string
	for _, n := range names[:min(len(names), maxMembers)] {
		s = append(s, pathString(append(slices.Clone(parent), n)))
	}
	if len(names) > maxMembers {
		s = append(s, "…")
	}
	return strings.Join(s, ", ")
}

// pathString writes path as jq does: .status.external_address,
// ."with space".
func pathString(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('.')
		if jq.IsKey(p) {
			b.WriteString(p)
		} else {
			b.WriteString(strconv.Quote(p))
		}
	}
	return b.String()
}

// untilError is err, an error of Until over the view, with a hint when
// the view is an array (List) and Until treated it as one object
// (`.state == "UP"`): that it sees every object at once, and the --each
// that tests each of them.
func (r *run) untilError(err error) error {
	if err == nil || !r.o.List || !objectExpected(err) {
		return err
	}
	return fmt.Errorf("%w; %s sees the array of all objects: to test each object, --each %s", err, r.o.Until.Name(), shellQuote(r.o.Until.Expr()))
}

// objectExpected reports whether err is jq's for an array given where
// an object was expected (gojq's errors have no types to match).
func objectExpected(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "expected an object but got: array") || strings.Contains(msg, "cannot index array with")
}

// shellQuote quotes s for a POSIX shell, as a person would copy it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
