package near

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"state", "state", 0}, {"stat", "state", 1}, {"sate", "state", 1},
		{"satte", "state", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}

func TestField(t *testing.T) {
	for _, c := range []struct {
		name, title string
		names       []string
		want        string
	}{
		{title: "one edit", name: "stat", names: []string{"id", "roles", "state", "status"}, want: "state"},
		{title: "a transposition", name: "satte", names: []string{"id", "state", "status"}, want: "state"},
		{title: "a longer name it starts", name: "external", names: []string{"id", "external_address"}, want: "external_address"},
		{title: "a shorter name that starts it", name: "statuses", names: []string{"id", "status"}, want: "status"},
		{title: "ties go to byte order", name: "rolex", names: []string{"roles", "rolez"}, want: "roles"},
		{title: "nothing close", name: "health", names: []string{"id", "state", "roles"}, want: ""},
		{title: "short names take one edit at most", name: "ab", names: []string{"xy", "abc"}, want: "abc"},
		{title: "short, two edits is too far", name: "ab", names: []string{"xy"}, want: ""},
		{title: "the name itself is not a suggestion", name: "id", names: []string{"id"}, want: ""},
		{title: "no names", name: "state", want: ""},
	} {
		t.Run(c.title, func(t *testing.T) {
			if got := Field(c.name, c.names); got != c.want {
				t.Errorf("Field(%q, %q) = %q, want %q", c.name, c.names, got, c.want)
			}
		})
	}
}

func TestIDs(t *testing.T) {
	fleet := []string{
		"metropolis-1f2e3d4c5b6a",
		"metropolis-1f2e3d4c9999",
		"metropolis-77aa88bb99cc",
		"metropolis-a1b2c3d4e5f6",
	}
	for _, c := range []struct {
		title, id string
		ids       []string
		n         int
		want      []string
	}{
		{title: "one typo", id: "metropolis-a1b2c3d4e5f7", ids: fleet, n: 3, want: []string{"metropolis-a1b2c3d4e5f6"}},
		{title: "a shortened id names every id it starts", id: "metropolis-1f2e", ids: fleet, n: 3,
			want: []string{"metropolis-1f2e3d4c5b6a", "metropolis-1f2e3d4c9999"}},
		{title: "a copied id with its end wrong", id: "metropolis-77aa88bbxxxxxx", ids: fleet, n: 3, want: []string{"metropolis-77aa88bb99cc"}},
		{title: "closest first, at most n", id: "metropolis-1f2e3d4c5b6b", ids: fleet, n: 1, want: []string{"metropolis-1f2e3d4c5b6a"}},
		{title: "the prefix all share is no likeness", id: "metropolis-zzzzzzzzzzzz", ids: fleet, n: 3, want: nil},
		{title: "nothing alike", id: "node-7", ids: fleet, n: 3, want: nil},
		{title: "one node", id: "metropolis-a1b2c3d4e5f7", ids: fleet[3:], n: 3, want: []string{"metropolis-a1b2c3d4e5f6"}},
		{title: "one node, alike only in the start ids share", id: "metropolis-zz", ids: []string{"metropolis-a1"}, n: 3, want: nil},
		{title: "one node, one edit after the start ids share", id: "metropolis-a2", ids: []string{"metropolis-a1"}, n: 3, want: []string{"metropolis-a1"}},
		{title: "a start shared by chance is no likeness", id: "metropolis-1f2e3d4cxxxx",
			ids: fleet[:2], n: 3, want: []string{"metropolis-1f2e3d4c5b6a", "metropolis-1f2e3d4c9999"}},
		{title: "short ids", id: "n2", ids: []string{"n1", "n3", "m9"}, n: 3, want: []string{"n1", "n3"}},
		{title: "no nodes", id: "n1", n: 3, want: nil},
	} {
		t.Run(c.title, func(t *testing.T) {
			if diff := cmp.Diff(c.want, IDs(c.id, c.ids, c.n)); diff != "" {
				t.Errorf("IDs(%q) (-want +got):\n%s", c.id, diff)
			}
		})
	}
}
