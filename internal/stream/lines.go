package stream

import (
	"encoding/json"
	"slices"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// change is one line of what an update changed (-o text): a path as a
// person reads it, relative to the change root, and its value before and
// after; or, with mark, an item that a keyed list gained (+) or lost (-).
type change struct {
	name          string
	old, now      []byte
	oldOK, nowOK  bool
	mark, summary string // "+" or "-", and "key=value"
}

// itemKeys are the members that name the items of a list of objects,
// in the order they are tried: labels carry a key, roles and other
// lists a name or an id.
var itemKeys = []string{"key", "name", "id"}

// changes turns the paths of an update into the lines a person reads:
//   - a list whose items carry a key (itemKeys) is compared by that key,
//     so a label that changed reads .labels.pairs[rack]: "r1" → "r2", a
//     new one .labels.pairs: + zone=z3, a removed one - rack=r1;
//   - an object that appears shows its fields, each on a line of its own.
func changes(prev, obj *jsondoc.Doc, root jsondoc.Path, paths []jsondoc.Path) []change {
	var out []change
	keyed := map[string]bool{} // the keyed lists already compared
	for _, p := range paths {
		if i, key, ok := keyedList(prev, obj, p); ok {
			list := p[:i+1]
			name := displayPath(list[len(root):])
			if keyed[name] {
				continue
			}
			keyed[name] = true
			out = append(out, keyedChanges(prev, obj, list, name, key)...)
			continue
		}
		old, oldOK := jsondoc.At(prev, p)
		now, nowOK := jsondoc.At(obj, p)
		if !oldOK && nowOK && now[0] == '{' && jsondoc.Len(now) > 0 {
			out = append(out, fields(p[len(root):], now)...)
			continue
		}
		out = append(out, change{name: displayPath(p[len(root):]), old: old, now: now, oldOK: oldOK, nowOK: nowOK})
	}
	return out
}

// keyedList finds the deepest list on path p (or p itself) whose items,
// before and after, are objects named by one of itemKeys; i is its last
// step in p.
func keyedList(prev, obj *jsondoc.Doc, p jsondoc.Path) (i int, key string, ok bool) {
	for i = len(p) - 1; i >= 0; i-- {
		old, oldOK := jsondoc.At(prev, p[:i+1])
		now, nowOK := jsondoc.At(obj, p[:i+1])
		if !oldOK || !nowOK || old[0] != '[' || now[0] != '[' {
			continue
		}
		for _, k := range itemKeys {
			if _, a := items(old, k); a {
				if _, b := items(now, k); b {
					return i, k, true
				}
			}
		}
	}
	return 0, "", false
}

// items decodes list, an array of objects each with a distinct string
// member key, by that member; ok is false for any other array.
func items(list []byte, key string) (byKey map[string]json.RawMessage, ok bool) {
	var objs []map[string]json.RawMessage
	if json.Unmarshal(list, &objs) != nil || len(objs) == 0 {
		return nil, false
	}
	byKey = map[string]json.RawMessage{}
	for _, o := range objs {
		var k string
		if o == nil || json.Unmarshal(o[key], &k) != nil || byKey[k] != nil {
			return nil, false
		}
		item, _ := json.Marshal(o)
		byKey[k] = item
	}
	return byKey, true
}

// keyedChanges compares the list at path by its items' member key.
func keyedChanges(prev, obj *jsondoc.Doc, path jsondoc.Path, name, key string) []change {
	old, _ := jsondoc.At(prev, path)
	now, _ := jsondoc.At(obj, path)
	before, _ := items(old, key)
	after, _ := items(now, key)
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if before[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []change
	for _, k := range keys {
		b, a := before[k], after[k]
		switch {
		case b == nil:
			out = append(out, change{name: name, mark: "+", summary: itemSummary(k, a, key)})
		case a == nil:
			out = append(out, change{name: name, mark: "-", summary: itemSummary(k, b, key)})
		case string(b) != string(a):
			ov, nv := itemValue(b, key), itemValue(a, key)
			out = append(out, change{name: name + "[" + k + "]", old: ov, now: nv, oldOK: true, nowOK: true})
		}
	}
	return out
}

// itemValue is what a person compares of an item: its value, when the
// item is only a key and a value (a label); else the whole item.
func itemValue(item []byte, key string) []byte {
	var o map[string]json.RawMessage
	json.Unmarshal(item, &o)
	if v, ok := o["value"]; ok && len(o) == 2 && key == "key" {
		return v
	}
	return item
}

// itemSummary is an added or removed item: key=value for a label (the
// value as it is, a string unquoted), else its key.
func itemSummary(k string, item []byte, key string) string {
	v := itemValue(item, key)
	if string(v) == string(item) {
		return k
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return k + "=" + s
	}
	return k + "=" + string(v)
}

// fields are the lines of an object v that appeared at path: one per
// member, down to the values that are not objects.
func fields(path jsondoc.Path, v []byte) []change {
	var members map[string]json.RawMessage
	if json.Unmarshal(v, &members) != nil {
		return []change{{name: displayPath(path), now: v, nowOK: true}}
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []change
	for _, k := range keys {
		m := slices.Concat(path, jsondoc.Path{k})
		if mv := members[k]; len(mv) > 0 && mv[0] == '{' && jsondoc.Len(mv) > 0 {
			out = append(out, fields(m, mv)...)
		} else {
			out = append(out, change{name: displayPath(m), now: mv, nowOK: true})
		}
	}
	return out
}

// displayPath is FormatPath for a line; "" for the root itself.
func displayPath(p jsondoc.Path) string {
	if len(p) == 0 {
		return ""
	}
	return FormatPath(p)
}
