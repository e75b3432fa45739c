package stream

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Text change lines: how far they are indented (under the event type),
// how many an update shows before it sums up the rest, and how wide they
// may be unless Options.Width says otherwise.
const (
	changeIndent   = "           "
	maxChangeLines = 10
	defaultWidth   = 100
	absent         = "(absent)"
)

// textChanges writes what an update changed under Options.ChangeRoot,
// one line per path, values shortened to fit the width:
//
//	.status.external_address: "10.0.0.1" → "10.0.0.2"
func (e *Encoder) textChanges(b *bytes.Buffer, ev flow.Event) {
	root := e.opts.ChangeRoot
	var paths []jsondoc.Path
	for _, p := range e.changed(ev) {
		if len(p) >= len(root) && slices.Equal(p[:len(root)], root) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 && len(root) > 0 {
		b.WriteString("\n" + changeIndent + "(" + FormatPath(root) + " unchanged)")
		return
	}
	width := e.opts.Width
	if width <= 0 {
		width = defaultWidth
	}
	lines, more := changes(asDoc(ev.Prev), asDoc(ev.Object), root, paths, maxChangeLines)
	for _, c := range lines {
		b.WriteString("\n" + changeIndent)
		used := len(changeIndent) + utf8.RuneCountInString(" → ")
		if c.name != "" {
			name := sanitize(c.name)
			b.WriteString(name)
			b.WriteString(": ")
			used += utf8.RuneCountInString(name) + 2
		}
		switch c.mark {
		case "+":
			e.colored(b, ansiGreen, "+ "+sanitize(c.summary))
			continue
		case "-":
			e.colored(b, ansiRed, "- "+sanitize(c.summary))
			continue
		case "~":
			b.WriteString("(" + c.summary + ")")
			continue
		}
		budget := max((width-used)/2, 12)
		o, n := shorten(c.old, c.oldOK, budget), shorten(c.now, c.nowOK, budget)
		// A list (an object) that had to be summed up on one side is
		// summed up on both, so that the two compare at a glance.
		container := c.oldOK && c.nowOK && c.old[0] == c.now[0] && (c.old[0] == '[' || c.old[0] == '{')
		if container && (o != string(c.old)) != (n != string(c.now)) {
			o, n = size(c.old), size(c.now)
		}
		e.colored(b, ansiRed, sanitize(o))
		b.WriteString(" → ")
		e.colored(b, ansiGreen, sanitize(n))
	}
	if more > 0 {
		fmt.Fprintf(b, "\n"+changeIndent+"… and %d more", more)
	}
}

func (e *Encoder) colored(b *bytes.Buffer, code, s string) {
	e.color(b, code)
	b.WriteString(s)
	e.color(b, ansiReset)
}

// shorten returns the JSON value v in at most budget characters: whole if
// it fits, else a list or an object as its size, a string or a number cut
// with "…".
func shorten(v []byte, ok bool, budget int) string {
	switch {
	case !ok:
		return absent
	case utf8.RuneCount(v) <= budget:
		return string(v)
	case v[0] == '[' || v[0] == '{':
		return size(v)
	}
	cut := v
	for n := 0; n < budget-2 && len(cut) > 0; n++ {
		_, size := utf8.DecodeRune(cut)
		cut = cut[size:]
	}
	s := string(v[:len(v)-len(cut)])
	if v[0] == '"' {
		return s + `…"`
	}
	return s + "…"
}

// cutLine cuts the line in b so that it is at most width characters
// wide, ending in "…"; the part before start (time, type, id) is kept
// whole.
func cutLine(b *bytes.Buffer, start, width int) {
	line := b.Bytes()
	if i := bytes.LastIndexByte(line[:start], '\n'); i >= 0 {
		line = line[i+1:]
		start -= i + 1
	}
	// Escape codes take no room on the screen.
	if utf8.RuneCount(ansi.ReplaceAll(line, nil)) <= width {
		return
	}
	room := max(width-utf8.RuneCount(ansi.ReplaceAll(line[:start], nil))-1, 0)
	tail := line[start:]
	n := 0
	for i := range string(tail) {
		if n == room {
			b.Truncate(b.Len() - len(tail) + i)
			b.WriteString("…")
			return
		}
		n++
	}
}

// ansi matches the colour codes the encoder writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// size sums up the array or object v: "[3 items]", "{1 field}".
func size(v []byte) string {
	n := jsondoc.Len(v)
	if v[0] == '[' {
		return fmt.Sprintf("[%d %s]", n, plural(n, "item"))
	}
	return fmt.Sprintf("{%d %s}", n, plural(n, "field"))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// FormatPath returns p as a jq path expression: .status.external_address,
// .roles[0], .labels["app.kubernetes.io/name"]; the empty path is ".".
func FormatPath(p jsondoc.Path) string {
	if len(p) == 0 {
		return "."
	}
	var b strings.Builder
	for i, step := range p {
		switch s := step.(type) {
		case int:
			if i == 0 {
				b.WriteByte('.')
			}
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case string:
			switch {
			case jq.IsKey(s):
				b.WriteString("." + s)
			case i == 0:
				b.WriteString(".[" + quote(s) + "]")
			default:
				b.WriteString("[" + quote(s) + "]")
			}
		}
	}
	return b.String()
}

// quote returns s as a JSON string.
func quote(s string) string {
	var b bytes.Buffer
	writeString(&b, s)
	return b.String()
}

// sanitize replaces the control characters in s (which a terminal would
// obey: a key or an address may hold any byte) with U+FFFD.
func sanitize(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return utf8.RuneError
		}
		return r
	}, s)
}

// isControl reports whether a terminal may take r as a control: C0, DEL
// and C1.
func isControl(r rune) bool { return r < 0x20 || 0x7f <= r && r < 0xa0 }
