package stream

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// modelFit is fit as its doc says it, the plain way: leave out the last
// columns while minColumn cells each (or their natural width, if less)
// do not fit; then try every cap from the widest column down, the first
// that fits wins, and the cells left over go one each to the first
// columns that were cut.
func modelFit(natural []int, total int) []int {
	w := append([]int(nil), natural...)
	if total <= 0 || len(w) == 0 || sum(w) <= total {
		return w
	}
	n := len(w)
	for n > 1 {
		least := gap * (n - 1)
		for _, nat := range natural[:n] {
			least += min(nat, minColumn)
		}
		if least <= total {
			break
		}
		n--
	}
	for i := n; i < len(w); i++ {
		w[i] = 0
	}
	if n == 1 {
		w[0] = min(natural[0], total)
		return w
	}
	widest := 0
	for _, nat := range natural[:n] {
		widest = max(widest, nat)
	}
	for c := widest; c >= minColumn; c-- {
		used := gap * (n - 1)
		for i, nat := range natural[:n] {
			w[i] = min(nat, c)
			used += w[i]
		}
		if used <= total {
			for i, nat := range natural[:n] {
				if used < total && w[i] < nat {
					w[i]++
					used++
				}
			}
			return w
		}
	}
	panic("minColumn always fits")
}

// randomCell returns a value of up to n runes: ASCII, accented, CJK
// (two cells each), emoji, and combining marks (none).
func randomCell(rng *rand.Rand, n int) string {
	alphabets := []string{"abcdefghij0123456789", "éüßçñ", "値全角書日本語", "🙂🚀", "a\u0301e\u0308"}
	var b strings.Builder
	for range rng.IntN(n + 1) {
		a := []rune(alphabets[rng.IntN(len(alphabets))])
		b.WriteRune(a[rng.IntN(len(a))])
	}
	return b.String()
}

// TestFit: for widths 40 to 200 and random tables (values with wide and
// zero-width characters), fit gives the model's widths, and the rows
// written in them fit the width, keep their cells' starts and say where
// they were cut.
func TestFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for total := 40; total <= 200; total++ {
		for range 20 {
			cols := 1 + rng.IntN(9)
			rows := make([][]string, 1+rng.IntN(6))
			for i := range rows {
				rows[i] = make([]string, cols)
				for j := range rows[i] {
					rows[i][j] = randomCell(rng, []int{3, 10, 40, 120}[rng.IntN(4)])
					if i == 0 { // a header: never empty
						rows[i][j] = "h" + rows[i][j]
					}
				}
			}
			nat := natural(rows...)
			got, want := fit(nat, total), modelFit(nat, total)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("fit(%v, %d) (-want +got):\n%s", nat, total, diff)
			}
			if sum(got) > total {
				t.Fatalf("fit(%v, %d) = %v: %d cells", nat, total, got, sum(got))
			}
			for _, r := range rows {
				var b bytes.Buffer
				writeRow(&b, r, got, nil, "")
				line := b.String()
				if n := cellWidth(line); n > total {
					t.Fatalf("row %q in %v: %d cells, more than %d", line, got, n, total)
				}
				checkCells(t, line, r, got)
			}
		}
	}
}

// checkCells checks that line holds each cell of r that its column shows,
// whole or cut (its start, then "…"), where its column begins.
func checkCells(t *testing.T, line string, r []string, w []int) {
	t.Helper()
	rest := []rune(line)
	for i, c := range r {
		if w[i] == 0 {
			continue
		}
		// Take w[i] cells of the line (fewer at its end).
		var cellRunes []rune
		used := 0
		for len(rest) > 0 && used+runeWidth(rest[0]) <= w[i] {
			used += runeWidth(rest[0])
			cellRunes, rest = append(cellRunes, rest[0]), rest[1:]
		}
		for len(rest) > 0 && runeWidth(rest[0]) == 0 { // marks after the last cell
			cellRunes, rest = append(cellRunes, rest[0]), rest[1:]
		}
		got := strings.TrimRight(string(cellRunes), " ")
		if cut, ok := strings.CutSuffix(got, "…"); ok && cellWidth(c) > w[i] {
			if !strings.HasPrefix(c, cut) {
				t.Fatalf("cell %q shown as %q in %q", c, got, line)
			}
		} else if got != strings.TrimRight(c, " ") {
			t.Fatalf("cell %q shown as %q in %q (widths %v)", c, got, line, w)
		}
		// The gap.
		for g := 0; g < gap && len(rest) > 0; g++ {
			if rest[0] != ' ' {
				t.Fatalf("no gap after cell %d in %q", i, line)
			}
			rest = rest[1:]
		}
	}
}

func TestCellWidth(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "値は": 4, "🙂": 2, "e\u0301": 1, "ß…": 2} {
		if got := cellWidth(s); got != want {
			t.Errorf("cellWidth(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestTableAppended: into a pipe, a header once, then a row per change in
// columns that only grow, a deleted row marked, nothing before a batch
// ends (or Flush, when --count ends a run within one), and what
// Truncate drops never printed.
func TestTableAppended(t *testing.T) {
	var out bytes.Buffer
	cols := []Column{
		{Name: "key", Value: func(o any) string { return jsondoc.TreeOf(o).(map[string]any)["k"].(string) }},
		{Name: "v", Value: func(o any) string { return jsondoc.TreeOf(o).(map[string]any)["v"].(string) }},
	}
	now := time.Unix(0, 0)
	e := NewEncoder(&out, Options{Format: Table, Columns: cols, Now: func() time.Time { return now }})
	obj := func(k, v string) *jsondoc.Doc { return jsondoc.New([]byte(`{"k":"` + k + `","v":"` + v + `"}`)) }
	for _, ev := range []flow.Event{
		{Type: flow.New, ID: "a", Object: obj("a", "1")},
		{Type: flow.New, ID: "b", Object: obj("b", "22")},
		{Type: flow.BatchDone, Cause: flow.CauseInitial},
		{Type: flow.Updated, ID: "a", Object: obj("a", "a longer one"), Prev: obj("a", "1")},
		{Type: flow.BatchDone},
		{Type: flow.Deleted, ID: "b", Prev: obj("b", "22")},
		{Type: flow.BatchDone},
		{Type: flow.New, ID: "c", Object: obj("c", "dropped")},
	} {
		if err := e.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	e.Truncate(e.Buffered())
	e.Encode(flow.Event{Type: flow.New, ID: "d", Object: obj("d", "kept")})
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "KEY  V\na    1\nb    22\na    a longer one\nb    22  (deleted)\nd    kept\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := e.Close(true); err != nil {
		t.Fatal(err)
	}
}

// TestTableScreenDraw: on a screen, the alternate screen first, a marked
// change, the rows cut to the height with the rest counted, and the
// screen given back, the final table printed after a goal met.
func TestTableScreenDraw(t *testing.T) {
	var out testkit.Buffer
	cols := []Column{{Name: "id", Value: func(o any) string { return jsondoc.TreeOf(o).(map[string]any)["k"].(string) }}, {Name: "age", Age: true}}
	now := time.Unix(100, 0)
	e := NewEncoder(&out, Options{Format: Table, Screen: true, Width: 60, Height: 4, Columns: cols, Now: func() time.Time { return now }})
	e.scr.every = time.Hour // no draw but those of the test
	obj := func(k string) *jsondoc.Doc { return jsondoc.New([]byte(`{"k":"` + k + `"}`)) }
	for _, id := range []string{"c", "a", "b"} {
		e.Encode(flow.Event{Type: flow.New, ID: id, Object: obj(id)})
	}
	if err := e.Encode(flow.Event{Type: flow.BatchDone, Rev: 7}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{altScreen + home + "ID", ansiReverse + "a", "3 objects (1 not shown) · rev 7 · last change 0s ago"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	if strings.Contains(got, "\nc") || strings.HasSuffix(got, "\n") {
		t.Errorf("more lines than the screen has: %q", got)
	}
	now = now.Add(90 * time.Second)
	if err := e.Close(true); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String()[len(got):], leaveScreen+"ID  AGE\na   90s\nb   90s\nc   90s\n"; got != want {
		t.Errorf("after Close: %q, want %q", got, want)
	}
}
