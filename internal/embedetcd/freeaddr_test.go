package embedetcd

import "testing"

// TestFreeAddrOnDistinct: the addresses FreeAddrOn returns one after
// another are all different, although each port is closed again at once
// and the kernel may hand it out again.
func TestFreeAddrOnDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 3000 {
		addr, err := FreeAddrOn("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s returned twice (after %d addresses)", addr, len(seen))
		}
		seen[addr] = true
	}
}
