package stream

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// TestKeyedChangesModel: random label lists before and after, in random
// order; the lines of the update name exactly the labels the model says
// were added (+ key=value), removed (- key=value) and changed
// ([key]: old → new), whatever the order and the lengths.
func TestKeyedChangesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	labels := func() map[string]string {
		m := map[string]string{}
		for range rng.IntN(5) {
			m[string(rune('a'+rng.IntN(6)))] = fmt.Sprint(rng.IntN(3))
		}
		return m
	}
	doc := func(m map[string]string) *jsondoc.Doc {
		type pair struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		}
		pairs := []pair{}
		for k, v := range m {
			pairs = append(pairs, pair{k, v})
		}
		rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		b, _ := json.Marshal(map[string]any{"id": "n", "labels": map[string]any{"pairs": pairs}})
		return jsondoc.New(b)
	}
	for i := range 2000 {
		before, after := labels(), labels()
		prev, obj := doc(before), doc(after)
		var want []string
		for k, v := range before {
			switch w, ok := after[k]; {
			case !ok:
				want = append(want, "- "+k+"="+v)
			case w != v:
				want = append(want, fmt.Sprintf(".labels.pairs[%s]: %q → %q", k, v, w))
			}
		}
		for k, v := range after {
			if _, ok := before[k]; !ok {
				want = append(want, "+ "+k+"="+v)
			}
		}
		if len(before) == 0 || len(after) == 0 {
			continue // no items on one side to name them by: [] → [n items]
		}
		var got []string
		lines, _ := changes(prev, obj, nil, jsondoc.Diff(prev, obj), 1000)
		for _, c := range lines {
			if c.mark != "" {
				got = append(got, c.mark+" "+c.summary)
			} else {
				got = append(got, fmt.Sprintf("%s: %s → %s", c.name, c.old, c.now))
			}
		}
		if len(want) == 0 && !prev.Equal(obj) {
			want = []string{"~ the same items, in another order"}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: %v → %v\n got %q\nwant %q", i, before, after, got, want)
		}
	}
}

// TestNewObjectFields: an object that appears shows its fields.
func TestNewObjectFields(t *testing.T) {
	prev := jsondoc.New([]byte(`{"id":"n","state":"NEW"}`))
	obj := jsondoc.New([]byte(`{"id":"n","state":"UP","status":{"address":"10.0.0.1","version":{"major":1}},"roles":{}}`))
	var got []string
	lines, _ := changes(prev, obj, nil, jsondoc.Diff(prev, obj), 1000)
	for _, c := range lines {
		got = append(got, fmt.Sprintf("%s: %s → %s", c.name, c.old, c.now))
	}
	want := []string{`.roles:  → {}`, `.state: "NEW" → "UP"`, `.status.address:  → "10.0.0.1"`, `.status.version.major:  → 1`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
