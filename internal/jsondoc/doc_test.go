package jsondoc

import (
	"bytes"
	"runtime/debug"
	"sync"
	"testing"
)

// Free gives back only what its maker gave, and overwrites it at once;
// BlankFor makes the next Doc from it.
func TestFree(t *testing.T) {
	kept := New([]byte(`{"a":1}`))
	Free(kept)
	if string(kept.JSON()) != `{"a":1}` {
		t.Fatalf("a Doc its maker did not give was freed: %q", kept.JSON())
	}
	d, _, b := BlankFor(64)
	b = append(b, `{"b":2}`...)
	d.Indexed(b, "b", 5, 6, nil).Give()
	json := d.JSON()
	Free(d)
	want := `#"b":2}` // outside the tests' builds: the first byte
	if poisonAll {
		want = "#######"
	}
	if string(json) != want {
		t.Fatalf("a freed Doc's encoding reads %q, not %q (what no JSON starts with)", json, want)
	}
	if _, ok := d.Member("b"); ok || len(d.JSON()) != 0 {
		t.Fatalf("a freed Doc still knows its member, or its encoding: %q", d.JSON())
	}
	Free(New(nil).Give()) // nothing to keep: no panic
	big := New(make([]byte, maxFree+1)).Give()
	Free(big)
	if len(big.JSON()) != maxFree+1 {
		t.Fatal("a Doc larger than maxFree was freed")
	}
}

// freedAs reports whether b reads as Free leaves an encoding: its first
// byte overwritten, or, in the tests' builds (poisonAll), all of it.
func freedAs(b []byte) bool {
	if !poisonAll {
		return len(b) > 0 && b[0] == freed
	}
	return len(b) > 0 && len(bytes.Trim(b, string(freed))) == 0
}

// TestFreeShared: a Doc its maker shares is freed by the second Free,
// from whichever goroutine calls it last; the first leaves it whole.
func TestFreeShared(t *testing.T) {
	for range 200 {
		d, _, b := BlankFor(64)
		d.Indexed(append(b, `{"b":2}`...), "b", 5, 6, nil).Share()
		json := d.JSON()
		Free(d)
		if string(json) != `{"b":2}` {
			t.Fatalf("a shared Doc was freed by its first Free: %q", json)
		}
		done := make(chan struct{})
		go func() { Free(d); close(done) }()
		<-done
		if !freedAs(json) {
			t.Fatalf("a shared Doc freed twice reads %q", json)
		}
	}
	// Both at once: one of them frees it.
	for range 200 {
		d, _, b := BlankFor(64)
		d.Indexed(append(b, `{"b":2}`...), "b", 5, 6, nil).Share()
		json := d.JSON()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { Free(d) })
		}
		wg.Wait()
		if !freedAs(json) {
			t.Fatalf("a shared Doc freed by two goroutines reads %q", json)
		}
	}
}

// TestFreeClasses: a freed buffer of a large record makes the next large
// one, and not a small one, which would hold its memory.
func TestFreeClasses(t *testing.T) {
	for _, c := range []struct {
		n    int
		pool *sync.Pool
	}{{1, &docs[0]}, {2048, &docs[0]}, {2049, &docs[1]}, {8192, &docs[1]}, {8193, &docs[2]}, {32768, &docs[2]}, {32769, nil}} {
		if poolFor(c.n) != c.pool {
			t.Errorf("poolFor(%d) is not the pool of its class", c.n)
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection empties the pools
	for _, n := range []int{3 << 10, 6 << 10, 20 << 10} {
		// A pool may drop what it is given (always a quarter of it
		// under the race detector), or keep it where another P looks
		// last: it is tried until once the buffer comes back.
		reused := false
		for try := 0; try < 40 && !reused; try++ {
			d, _, b := BlankFor(n)
			d.Indexed(append(b, `{"b":2}`...), "b", 5, 6, nil).Give()
			Free(d)
			if _, _, small := BlankFor(100); cap(small) > freeClasses[0] {
				t.Fatalf("%d B: a blank Doc for 100 bytes took a buffer of %d", n, cap(small))
			}
			if _, _, smaller := BlankFor(n / 4); n > 8<<10 && cap(smaller) > 8<<10 {
				t.Fatalf("%d B: a blank Doc for %d bytes took a buffer of %d", n, n/4, cap(smaller))
			}
			_, _, again := BlankFor(n)
			if cap(again) < n {
				t.Fatalf("%d B: a blank Doc with room for %d bytes", n, cap(again))
			}
			reused = &again[:1][0] == &b[:1][0]
		}
		if !reused {
			t.Fatalf("%d B: a freed buffer never made the next Doc of its size", n)
		}
	}
}
