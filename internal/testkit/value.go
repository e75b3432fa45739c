package testkit

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// RandomValue returns an etcd value of one of the shapes a watch must
// handle alike whatever path decodes it: JSON objects whose "state" is
// "UP" or "DOWN" (what a filter such as `.value.state == "UP"` keeps or
// turns down), with spaces to compact, escapes, nested members, or more
// members than a small index holds (members); values of at least big
// bytes; arrays and strings a filter fails on; null members; and text
// that is not JSON.
func RandomValue(rng *rand.Rand, big, members int) string {
	state := []string{"UP", "DOWN"}[rng.IntN(2)]
	switch rng.IntN(14) {
	case 0:
		return "not json {"
	case 1:
		return `["UP"]`
	case 2:
		return `"UP"`
	case 3:
		return `{"state":null}`
	case 4:
		return fmt.Sprintf(` { "state" : %q , "s" : "tab\there \u00e9 \"q\"", "a" : [1, 2.5e3, null, {"b": true}] } `, state)
	case 5, 6:
		return fmt.Sprintf(`{"state":%q,"n":%d,"big":"%s"}`, state, rng.IntN(2), strings.Repeat("x", big))
	case 7:
		var b strings.Builder
		fmt.Fprintf(&b, `{"state":%q`, state)
		for m := range members {
			fmt.Fprintf(&b, `,"m%d":%d`, m, rng.IntN(2))
		}
		return b.String() + "}"
	case 8:
		return fmt.Sprintf(`{"state":%q,"nested":{"m%d":{"deep":[%d]}}}`, state, rng.IntN(5), rng.IntN(9))
	}
	return fmt.Sprintf(`{"state":%q,"n":%d}`, state, rng.IntN(2))
}
