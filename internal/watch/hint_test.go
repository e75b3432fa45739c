package watch

import (
	"encoding/json"
	"testing"

	"github.com/nodewatch/nodewatch/internal/jq"
)

// TestFilterHint: which member a hint names as missing, and the closest
// one it names instead.
func TestFilterHint(t *testing.T) {
	nodes := `[{"id":"a1","state":"NODE_STATE_UP","status":{"external_address":"10.0.0.1"}},
		{"id":"b2","state":"NODE_STATE_NEW","roles":{"kubernetes_worker":{}}}]`
	keys := `[{"key":"/v/a","value":{"state":"up"}},{"key":"/v/b","value":"text"}]`
	for _, c := range []struct {
		title, filter, objects, want string
	}{
		{"a misspelled member", `.stat == "NODE_STATE_UP"`, nodes,
			`--filter matched none of the 2 objects: none has .stat (did you mean .state?)`},
		{"the first path missing, not the first path", `.state == "X" and .role.x`, nodes,
			`--filter matched none of the 2 objects: none has .role (did you mean .roles?)`},
		{"a nested member", `.status.external_addr == "10.0.0.9"`, nodes,
			`--filter matched none of the 2 objects: none has .status.external_addr (did you mean .status.external_address?)`},
		{"nothing close: the members there", `.health == "HEALTHY"`, nodes,
			`--filter matched none of the 2 objects: none has .health (they have .id, .roles, .state, .status)`},
		{"inside a key's value", `.value.stat == "up"`, keys,
			`--filter matched none of the 2 objects: none has .value.stat (did you mean .value.state?)`},
		{"every member there: no hint", `.state == "NODE_STATE_GONE"`, nodes, ``},
		{"one object has it: no hint", `.roles.kubernetes_worker | not`, nodes, ``},
		{"no object where the member would be: no hint", `.id.x`, nodes, ``},
		{"no paths: no hint", `length > 100`, nodes, ``},
		{"a name jq quotes", `."zone name" == "east"`, `[{"zone-name":"east"}]`,
			`--filter did not match the one object: it has no ."zone name" (did you mean ."zone-name"?)`},
	} {
		t.Run(c.title, func(t *testing.T) {
			p, err := jq.Compile("--filter", c.filter, jq.Vars{})
			if err != nil {
				t.Fatal(err)
			}
			var objects []any
			if err := json.Unmarshal([]byte(c.objects), &objects); err != nil {
				t.Fatal(err)
			}
			if got := filterHint(p, objects, len(objects)); got != c.want {
				t.Errorf("filterHint(%s) =\n%q, want\n%q", c.filter, got, c.want)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		`.state == "NODE_STATE_UP"`: `'.state == "NODE_STATE_UP"'`,
		`.a == 'x'`:                 `'.a == '\''x'\'''`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
