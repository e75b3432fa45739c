package jsondoc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkCompactFrom: AppendCompactIndexedFrom(dst, src, ref, rx, x) makes
// what AppendCompactIndexed(dst, src) makes, byte for byte, with the same
// Index and an error for the same src, whether x is nil or a Doc's own
// (BlankFor); a Doc made with either Index (NewIndexed, Indexed) knows that
// Index.
func checkCompactFrom(t *testing.T, src, ref []byte, rx Index) {
	t.Helper()
	want, wx, werr := AppendCompactIndexed([]byte("pre"), src)
	d, lent, _ := BlankFor(0)
	for _, x := range []Index{nil, lent} {
		got, gx, gerr := AppendCompactIndexedFrom([]byte("pre"), src, ref, rx, x)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) || !slices.Equal(gx, wx) || (gx == nil) != (wx == nil) {
			t.Fatalf("from %q (Index %v), %q:\n got %q %v %v\nwant %q %v %v", ref, rx, src, got, gx, gerr, want, wx, werr)
		}
		if gerr != nil {
			continue
		}
		made := NewIndexed(got, "v", 3, len(got), gx)
		if x != nil {
			made = d.Indexed(got, "v", 3, len(got), gx)
		}
		if _, v, kx := made.Known(); !bytes.Equal(v, want[3:]) || !slices.Equal(kx, wx) || (kx == nil) != (wx == nil) {
			t.Fatalf("%q: the Doc knows %q, Index %v; want %q, %v", src, v, kx, want[3:], wx)
		}
	}
}

// randomObject returns a random JSON object with random space.
func randomObject(rng *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteString([]string{",", " , "}[rng.IntN(2)])
		}
		b.WriteString(randomString(rng) + ":")
		b.Write(randomJSON(rng, 1))
	}
	b.WriteString("}")
	return b.Bytes()
}

// wideObject returns a random JSON object of n members with plain keys.
func wideObject(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"m%d":`, i)
		b.Write(randomJSON(rng, 2))
	}
	b.WriteString("}")
	return b.Bytes()
}

// nextState returns another state of the compact object ref: the same, one
// member's value replaced (by JSON, with space or without, or by what is
// not a value), a key changed, or bytes edited anywhere.
func nextState(rng *rand.Rand, ref []byte, rx Index) []byte {
	k := rng.IntN(len(rx))
	start := stringEnd(ref, int(rx[k])) + 1
	end := len(ref) - 1
	if k+1 < len(rx) {
		end = int(rx[k+1]) - 1
	}
	replace := func(lo, hi int, with []byte) []byte {
		return slices.Concat(ref[:lo], with, ref[hi:])
	}
	junk := []string{"", ",", `1,"b":2`, `"x" "y"`, "[", "}", `"\`, "\x01", " ", "tru", "1 2", `{"a":1}}`}
	switch rng.IntN(8) {
	case 0:
		return slices.Clone(ref)
	case 1, 2:
		return replace(start, end, randomJSON(rng, 1))
	case 3:
		return replace(start, end, []byte(junk[rng.IntN(len(junk))]))
	case 4:
		// A part of the value only, as a heartbeat changes.
		lo := start + rng.IntN(end-start+1)
		hi := lo + rng.IntN(end-lo+1)
		return replace(lo, hi, []byte(junk[rng.IntN(len(junk))]+string(randomJSON(rng, 3))))
	case 5:
		return replace(int(rx[k]), start-1, []byte(randomString(rng)))
	}
	out := slices.Clone(ref)
	for range 1 + rng.IntN(3) {
		i := rng.IntN(len(out) + 1)
		c := []byte(`{}[]",: 0a\`)[rng.IntN(11)]
		switch rng.IntN(3) {
		case 0:
			out = slices.Insert(out, i, c)
		case 1:
			if i < len(out) {
				out = slices.Delete(out, i, i+1)
			}
		default:
			if i < len(out) {
				out[i] = c
			}
		}
	}
	return out
}

// TestCompactFromModel holds AppendCompactIndexedFrom to
// AppendCompactIndexed over random objects and random next states.
func TestCompactFromModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fast, wide := 0, 0 // cases that took the fast path; of them, with an Index a Doc cannot hold
	for i := range 30000 {
		obj := randomObject(rng)
		if i%10 == 0 {
			obj = wideObject(rng, 2*InlineIndex-i/10%InlineIndex)
		}
		ref, rx, err := AppendCompactIndexed(nil, obj)
		if err != nil || len(rx) == 0 {
			continue
		}
		src := nextState(rng, ref, rx)
		checkCompactFrom(t, src, ref, rx)
		if _, x, ok := appendChanged(nil, src, ref, rx, nil); ok {
			fast++
			if len(x) > InlineIndex {
				wide++
			}
		}
	}
	// Values that are no object, or an object with no members: no Index,
	// whatever the buffer lent.
	ref, rx, _ := AppendCompactIndexed(nil, []byte(`{"a":1}`))
	for _, src := range []string{`"a"`, `[1]`, `{}`, `{ }`, `1`, `null`} {
		checkCompactFrom(t, []byte(src), ref, rx)
	}
	if fast < 4000 || wide < 30 {
		t.Fatalf("only %d of the cases took the fast path, %d with more than %d members: the model tests little of it", fast, wide, InlineIndex)
	}
}

// TestCompactFromLarge: past 64 KiB there is no Index, as
// AppendCompactIndexed makes none.
func TestCompactFromLarge(t *testing.T) {
	big := `"` + string(bytes.Repeat([]byte("x"), 70000)) + `"`
	ref, rx, err := AppendCompactIndexed(nil, []byte(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	checkCompactFrom(t, []byte(`{"a":`+big+`,"b":2}`), ref, rx)
}

func FuzzCompactFrom(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":[1,2]}}`), []byte(`{"a":1,"b":{"c":[1,3]}}`))
	f.Add([]byte(`{"a":1,"b":2}`), []byte(`{"a":1,"b":2,"c":3}`))
	f.Add([]byte(`{"a":"x"}`), []byte(`{"a":"x" }`))
	f.Fuzz(func(t *testing.T, refSrc, src []byte) {
		ref, rx, err := AppendCompactIndexed(nil, refSrc)
		if err != nil || len(rx) == 0 {
			return
		}
		checkCompactFrom(t, src, ref, rx)
	})
}

// TestCommonPrefixSuffix: commonPrefix and commonSuffix agree with a loop
// over single bytes, on slices that share runs of every length, across
// the blocks and words they compare.
func TestCommonPrefixSuffix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		n := rng.IntN(300)
		if rng.IntN(4) == 0 { // runs long enough for blocks of kilobytes
			n = rng.IntN(5000)
		}
		a := make([]byte, n)
		for i := range a {
			a[i] = byte('a' + rng.IntN(3))
		}
		b := slices.Clone(a)
		switch rng.IntN(3) {
		case 0:
			b = b[:rng.IntN(len(b)+1)]
		case 1:
			b = append(b, a[:rng.IntN(len(a)+1)]...)
		}
		for range rng.IntN(3) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] = byte('a' + rng.IntN(3))
			}
		}
		pre, suf := 0, 0
		for pre < min(len(a), len(b)) && a[pre] == b[pre] {
			pre++
		}
		for suf < min(len(a), len(b)) && a[len(a)-1-suf] == b[len(b)-1-suf] {
			suf++
		}
		if got := commonPrefix(a, b); got != pre {
			t.Fatalf("commonPrefix(%q, %q) = %d, want %d", a, b, got, pre)
		}
		if got := commonSuffix(a, b); got != suf {
			t.Fatalf("commonSuffix(%q, %q) = %d, want %d", a, b, got, suf)
		}
	}
}
