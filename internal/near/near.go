// Package near finds, among names that exist, those closest to one that
// does not: the field a jq expression misspelled, the node id a person
// mistyped. It is what a hint on stderr names after "did you mean"; it
// guesses, so it would rather name nothing than something unrelated.
package near

import (
	"slices"
	"strings"
)

// Distance is the edit distance (Levenshtein, with a transposition of
// two neighbours counted as one edit) between a and b, in bytes.
func Distance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Field returns the name among names closest to name, a field that no
// object has: at most two edits away (one for a name of three bytes or
// fewer), or one that starts with name or that name starts with
// (".stat" for ".state", ".states"); "" when none is that close. Of
// two as close, the shorter distance wins, then the first in byte
// order, so that the choice does not depend on the order of names.
func Field(name string, names []string) string {
	maxD := 2
	if len(name) <= 3 {
		maxD = 1
	}
	best, bestD := "", maxD+1
	for _, n := range names {
		if n == name || n == "" {
			continue
		}
		d := Distance(name, n)
		if d > maxD && len(name) >= 3 && len(n) >= 3 && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n)) {
			d = maxD
		}
		if d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	return best
}

// IDs returns at most n of ids closest to id, closest first: those
// id is the start of (a shortened id), then those a few edits away
// (about one in four bytes of id, the start that all ids share aside,
// up to a separator: "metropolis-"), then those that share four bytes
// more than that start with id (a copied id with its end wrong). Ties
// go to byte order.
// It returns none when no id is that close: a guess that has nothing
// to do with id is noise.
func IDs(id string, ids []string, n int) []string {
	common := toSeparator(commonPrefix(ids))
	own := id
	if strings.HasPrefix(id, common) {
		own = id[len(common):]
	}
	maxD := max(len(own)/4, 1)
	type scored struct {
		id        string
		class, by int // lower is closer
	}
	var found []scored
	for _, c := range ids {
		if c == id {
			continue
		}
		switch d, p := Distance(id, c), len(commonPrefix([]string{id, c})); {
		case len(id) > len(common) && strings.HasPrefix(c, id):
			found = append(found, scored{c, 0, len(c)})
		case d <= maxD:
			found = append(found, scored{c, 1, d})
		case p-len(common) >= 4:
			found = append(found, scored{c, 2, -p})
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		if a.class != b.class {
			return a.class - b.class
		}
		if a.by != b.by {
			return a.by - b.by
		}
		return strings.Compare(a.id, b.id)
	})
	var out []string
	for _, s := range found[:min(len(found), n)] {
		out = append(out, s.id)
	}
	return out
}

// toSeparator cuts s after its last byte that is neither a letter nor
// a digit ("metropolis-" of "metropolis-1f2e"): where ids share a start
// by chance, it is no likeness.
func toSeparator(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return s[:i+1]
		}
	}
	return ""
}

// commonPrefix is the longest start that all of ss share ("" for none).
func commonPrefix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	p := ss[0]
	for _, s := range ss[1:] {
		n := 0
		for n < len(p) && n < len(s) && p[n] == s[n] {
			n++
		}
		p = p[:n]
	}
	return p
}
