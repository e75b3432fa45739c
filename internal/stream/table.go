package stream

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// Column is a column of -o table.
type Column struct {
	// Name heads the column (in capitals).
	Name string
	// Value returns the cell of an object; it is called once per event,
	// for the object it prints. Nil for an Age column.
	Value func(obj any) string
	// Age shows how long the row's object has been in the table (since
	// its new event) instead of a value: nodes carry no time of their own.
	Age bool
}

// row is one object of the table: its id and its cells (as Value gave
// them; "" for an Age column), and when it became new.
type row struct {
	id    string
	cells []string
	since time.Time
	// marked: the cells that changed in the last batch that changed
	// something (Screen).
	marked []bool
}

// table is what -o table keeps of the events it is given: a row per
// object for a screen, the rows of the batch being printed for appended
// lines. It is not safe for concurrent use (screen locks around it).
type table struct {
	cols []Column
	now  func() time.Time
	// rows: the objects, by id.
	rows map[string]*row
	// pending: the rows of the batch being printed, a deleted one marked
	// (appended lines only); widths: each column's width so far, which
	// only grows, so that a column stays where it was while it can.
	pending []pendingRow
	widths  []int
	header  bool // the header was printed
}

type pendingRow struct {
	r       row
	deleted bool
}

func newTable(cols []Column, now func() time.Time) *table {
	return &table{cols: cols, now: now, rows: map[string]*row{}}
}

// cells returns the cells of obj, each on one line of safe characters.
func (t *table) cells(obj any) []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		if c.Value != nil {
			out[i] = oneLine(c.Value(obj))
		}
	}
	return out
}

// oneLine returns s without what would break a row: controls (a newline,
// a tab, an escape) are shown as "�", so that a value cannot drive the
// terminal either.
func oneLine(s string) string {
	if strings.ContainsFunc(s, isControl) {
		return sanitize(s)
	}
	return s
}

// apply updates the rows with ev (Screen): a new object gets a row, all of
// it marked; an update marks the cells that differ; a deletion removes the
// row. It reports whether the rows changed.
func (t *table) apply(ev flow.Event) bool {
	switch ev.Type {
	case flow.New:
		r := &row{id: ev.ID, cells: t.cells(ev.Object), since: t.now()}
		r.marked = make([]bool, len(r.cells))
		for i := range r.marked {
			r.marked[i] = true
		}
		if old, ok := t.rows[ev.ID]; ok { // new again after a resync: the same row
			r.since = old.since
		}
		t.rows[ev.ID] = r
	case flow.Updated:
		cells := t.cells(ev.Object)
		r, ok := t.rows[ev.ID]
		if !ok {
			r = &row{id: ev.ID, since: t.now(), cells: make([]string, len(cells))}
			t.rows[ev.ID] = r
		}
		r.marked = make([]bool, len(cells))
		for i := range cells {
			r.marked[i] = cells[i] != r.cells[i]
		}
		r.cells = cells
	case flow.Deleted:
		delete(t.rows, ev.ID)
	default:
		return false
	}
	return true
}

// unmark clears every mark: a new batch of changes begins.
func (t *table) unmark() {
	for _, r := range t.rows {
		clear(r.marked)
	}
}

// sorted returns the rows by id (byte order of the raw id, as a batch's
// events come).
func (t *table) sorted() []*row {
	rows := make([]*row, 0, len(t.rows))
	for _, r := range t.rows {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *row) int { return strings.Compare(a.id, b.id) })
	return rows
}

// text returns the cells of r as shown at now: an Age column's age.
func (t *table) text(r *row, now time.Time) []string {
	out, cloned := r.cells, false
	for i, c := range t.cols {
		if c.Age {
			if !cloned {
				out, cloned = slices.Clone(r.cells), true
			}
			out[i] = age(now.Sub(r.since))
		}
	}
	return out
}

// headers returns the column names as the header shows them.
func (t *table) headers() []string {
	h := make([]string, len(t.cols))
	for i, c := range t.cols {
		h[i] = strings.ToUpper(c.Name)
	}
	return h
}

// natural returns the width of each column that shows rows whole,
// header included.
func natural(rows ...[]string) []int {
	var w []int
	for _, r := range rows {
		if w == nil {
			w = make([]int, len(r))
		}
		for i, c := range r {
			w[i] = max(w[i], cellWidth(c))
		}
	}
	return w
}

// writeRow writes cells in columns of widths w (a column of width 0 is
// left out), mark around the cells marked (marks nil: none). It ends
// with no blanks and no newline.
func writeRow(b *bytes.Buffer, cells []string, w []int, marks []bool, mark string) {
	start := b.Len()
	defer func() { // empty cells at its end leave blanks
		for b.Len() > start && b.Bytes()[b.Len()-1] == ' ' {
			b.Truncate(b.Len() - 1)
		}
	}()
	last := len(w) - 1
	for last > 0 && w[last] == 0 {
		last--
	}
	for i, c := range cells[:last+1] {
		if w[i] == 0 {
			continue
		}
		if i > 0 {
			b.WriteString("  ")
		}
		if marks != nil && marks[i] {
			b.WriteString(mark)
			pad(b, c, w[i], i == last)
			b.WriteString(ansiReset)
			continue
		}
		pad(b, c, w[i], i == last)
	}
}

// appended writes ev as -o table writes to what is not a terminal, one
// row per change (as kubectl get -w): the rows of a batch are kept until
// it ends, then written under the header (the first time), aligned with
// the rows before them where they fit. It reports whether ev ended a
// batch.
func (t *table) appended(b *bytes.Buffer, ev flow.Event) bool {
	switch ev.Type {
	case flow.New, flow.Updated, flow.Deleted:
		// The rows are kept too, for how long each object has been there.
		since := t.now()
		if r, ok := t.rows[ev.ID]; ok {
			since = r.since
		}
		t.apply(ev)
		p := pendingRow{deleted: ev.Type == flow.Deleted}
		if r, ok := t.rows[ev.ID]; ok {
			p.r = *r
		} else {
			p.r = row{id: ev.ID, cells: t.cells(ev.Prev), since: since}
		}
		t.pending = append(t.pending, p)
	case flow.BatchDone:
		t.flush(b)
		return true
	}
	return false
}

// flush writes the rows kept (and the header, the first time).
func (t *table) flush(b *bytes.Buffer) {
	if t.header && len(t.pending) == 0 {
		return
	}
	all := [][]string{t.headers()}
	for _, p := range t.pending {
		all = append(all, t.text(&p.r, t.now()))
	}
	nat := natural(all...)
	if t.widths == nil {
		t.widths = nat
	}
	for i := range t.widths {
		t.widths[i] = max(t.widths[i], nat[i])
	}
	if !t.header {
		t.header = true
		writeRow(b, all[0], t.widths, nil, "")
		b.WriteByte('\n')
	}
	for i, p := range t.pending {
		writeRow(b, all[i+1], t.widths, nil, "")
		if p.deleted {
			b.WriteString("  (deleted)")
		}
		b.WriteByte('\n')
	}
	t.pending = t.pending[:0]
}

// age returns d as kubectl shows ages: 45s, 3m12s, 2h5m, 3d4h.
func age(d time.Duration) string {
	switch s := int(d / time.Second); {
	case s < 0:
		return "0s"
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 48*3600:
		return fmt.Sprintf("%dh%dm", s/3600, s/60%60)
	default:
		return fmt.Sprintf("%dd%dh", s/86400, s/3600%24)
	}
}
