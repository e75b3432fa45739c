package watch

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestWarningsModel: random warnings of a few kinds at random times,
// against what must hold: every warning is accounted for exactly once
// (the first of its kind in full, the rest in counts), the first line of
// each kind is the full one, and apart from the flush no kind gets two
// lines within the interval.
func TestWarningsModel(t *testing.T) {
	more := regexp.MustCompile(`^warning: (--[a-z]+): (\d+) more errors \(treated as no match\), the last: "/k/\d+": (--[a-z]+): error \d+$`)
	full := regexp.MustCompile(`^warning: "/k/\d+": (--[a-z]+): error \d+ \(treated as no match\)$`)
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		now := time.Unix(0, 0)
		type line struct {
			at   time.Time
			text string
		}
		var lines []line
		w := newWarnings(func(format string, args ...any) { lines = append(lines, line{now, fmt.Sprintf(format, args...)}) }, 10*time.Second)
		w.now = func() time.Time { return now }
		sent := map[string]int{}
		kinds := 1 + rng.IntN(4)
		for i := 0; i < rng.IntN(300); i++ {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			// The errors of one program, whatever the value, are one kind.
			prog := []string{"--filter", "--equals", "--until"}[rng.IntN(kinds%3+1)]
			msg := prog + ": error " + strconv.Itoa(rng.IntN(kinds))
			sent[prog]++
			w.warn("/k/"+strconv.Itoa(rng.IntN(50)), msg)
		}
		flushAt := len(lines)
		w.flush()

		got := map[string]int{}
		last := map[string]time.Time{}
		for i, l := range lines {
			msg, n := "", 0
			if m := more.FindStringSubmatch(l.text); m != nil {
				msg = m[1]
				n, _ = strconv.Atoi(m[2])
				if m[3] != msg {
					t.Fatalf("seed %d: the count of %s names an error of %s", seed, msg, m[3])
				}
				if got[msg] == 0 {
					t.Fatalf("seed %d: a count before the full line of %q: %q", seed, msg, l.text)
				}
			} else if m := full.FindStringSubmatch(l.text); m != nil {
				msg, n = m[1], 1
				if got[msg] != 0 {
					t.Fatalf("seed %d: a second full line of %q", seed, msg)
				}
			} else {
				t.Fatalf("seed %d: unexpected line %q", seed, l.text)
			}
			if at, ok := last[msg]; ok && i < flushAt && l.at.Sub(at) < 10*time.Second {
				t.Fatalf("seed %d: two lines of %q within %v", seed, msg, l.at.Sub(at))
			}
			last[msg] = l.at
			got[msg] += n
		}
		for msg, n := range sent {
			if got[msg] != n {
				t.Fatalf("seed %d: %q sent %d times, accounted for %d", seed, msg, n, got[msg])
			}
		}
		if len(got) != len(sent) {
			t.Fatalf("seed %d: lines about %d kinds, %d sent", seed, len(got), len(sent))
		}
	}
}
