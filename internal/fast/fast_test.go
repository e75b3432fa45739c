package fast

import "testing"

func TestParse(t *testing.T) {
	all := Parse("off", "")
	for _, p := range Paths() {
		if !all[p] {
			t.Errorf("NODEWATCH_FAST=off left %v on", p)
		}
	}
	some := Parse("", " jq,RawIO ,nosuch")
	for _, p := range Paths() {
		if want := p == JQ || p == RawIO; some[p] != want {
			t.Errorf("NODEWATCH_FAST_OFF=jq,RawIO: %v off = %v, want %v", p, some[p], want)
		}
	}
	if none := Parse("on", ""); none != (Switches{}) {
		t.Errorf("NODEWATCH_FAST=on turned %v off", none)
	}
	if n := len(Paths()); n != int(nPaths) {
		t.Errorf("%d of the %d paths have a name", n, nPaths)
	}
}
