package stream

import (
	"bytes"
	"unicode"

	"golang.org/x/text/width"
)

// Columns of -o table are measured in terminal cells, not bytes or runes:
// a CJK character or an emoji takes two, a combining mark none.

// gap is the blank between two columns of a table.
const gap = 2

// minColumn is how narrow fit makes a column that is wider than it: below
// it, a cut value says too little (one letter and "…").
const minColumn = 4

// runeWidth returns how many terminal cells r takes.
func runeWidth(r rune) int {
	switch {
	case r == 0 || unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case r < 0x1100:
		return 1
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// cellWidth returns how many terminal cells s takes.
func cellWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

// fit returns the width of each column of a table whose widest cells
// (its header's included) are natural, in at most total cells with gap
// cells between two columns (total 0: no limit). Columns that fit keep
// their natural width. Otherwise the widest are made narrower first, all
// to one width (and the cells left over go one each to the first of
// them): a narrow column such as a state stays whole while a long value
// is cut. When even minColumn cells each are too many, the last columns
// are left out (their width is 0); the first stays, cut to total.
func fit(natural []int, total int) []int {
	w := append([]int(nil), natural...)
	if total <= 0 || len(w) == 0 || sum(w) <= total {
		return w
	}
	n := len(w)
	for ; n > 1; n-- {
		least := gap * (n - 1)
		for _, nat := range natural[:n] {
			least += min(nat, minColumn)
		}
		if least <= total {
			break
		}
	}
	for i := n; i < len(w); i++ {
		w[i] = 0
	}
	if n == 1 {
		w[0] = min(natural[0], total)
		return w
	}
	// The largest cap with every column at min(natural, cap) fitting:
	// the binary search's invariant is that lo fits and hi does not.
	room := total - gap*(n-1)
	capped := func(c int) int {
		s := 0
		for _, nat := range natural[:n] {
			s += min(nat, max(c, minColumn))
		}
		return s
	}
	lo, hi := minColumn, 1
	for _, nat := range natural[:n] {
		hi = max(hi, nat+1)
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; capped(mid) <= room {
			lo = mid
		} else {
			hi = mid
		}
	}
	left := room - capped(lo)
	for i, nat := range natural[:n] {
		w[i] = min(nat, lo)
		if w[i] < nat && left > 0 {
			w[i]++
			left--
		}
	}
	return w
}

// sum returns the cells a row of columns of widths w takes: the widths,
// and gap between two columns that are shown (width > 0).
func sum(w []int) int {
	s, shown := 0, 0
	for _, x := range w {
		if x > 0 {
			s += x
			shown++
		}
	}
	if shown > 1 {
		s += gap * (shown - 1)
	}
	return s
}

// pad writes s in exactly w cells: cut, with "…" as its last cell, when
// it is wider, padded with spaces when it is narrower (not when last is
// set: the last column of a row needs no blanks after it).
func pad(b *bytes.Buffer, s string, w int, last bool) {
	n := cellWidth(s)
	if n > w {
		used := 0
		for _, r := range s {
			rw := runeWidth(r)
			if used+rw > w-1 {
				break
			}
			b.WriteRune(r)
			used += rw
		}
		if w > 0 {
			b.WriteString("…")
			used++
		}
		n = used
	} else {
		b.WriteString(s)
	}
	if !last {
		for ; n < w; n++ {
			b.WriteByte(' ')
		}
	}
}
