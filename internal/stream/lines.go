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
//
// It stops at limit lines: more counts what is left, a path each (but
// those inside a list already compared), so that a large update costs
// what the lines shown cost.
func changes(prev, obj *jsondoc.Doc, root jsondoc.Path, paths []jsondoc.Path, limit int) (out []change, more int) {
	lists := map[string]*keyed{} // by path: each list is looked at once
	for n, p := range paths {
		if len(out) >= limit {
			for _, p := range paths[n:] {
				if !inDone(p, lists) {
					more++
				}
			}
			return out[:limit], more + len(out) - limit
		}
		if l := keyedList(prev, obj, p, lists); l != nil {
			if !l.done {
				l.done = true
				name := displayPath(l.path[len(root):])
				lines := keyedChanges(l, name)
				if len(lines) == 0 {
					lines = []change{{name: name, mark: "~", summary: "the same items, in another order"}}
				}
				out = append(out, lines...)
			}
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
	if len(out) > limit {
		return out[:limit], len(out) - limit
	}
	return out, 0
}

// inDone reports whether p lies in a keyed list whose lines are written.
func inDone(p jsondoc.Path, lists map[string]*keyed) bool {
	for i := range p {
		if l := lists[FormatPath(p[:i+1])]; l != nil && l.done {
			return true
		}
	}
	return false
}

// keyed is a list whose items, before and after, are objects named by
// their member key (one of itemKeys).
type keyed struct {
	path          jsondoc.Path
	key           string
	before, after map[string][]byte // the items, as they are written, by name
	done          bool              // its lines are written
}

// keyedList finds the deepest list on path p (or p itself) that is keyed,
// looking at each list once (lists remembers them by path, nil for one
// that is not keyed).
func keyedList(prev, obj *jsondoc.Doc, p jsondoc.Path, lists map[string]*keyed) *keyed {
	for i := len(p) - 1; i >= 0; i-- {
		if _, isIndex := p[i].(int); isIndex {
			continue // an element, not a list
		}
		at := FormatPath(p[:i+1])
		l, seen := lists[at]
		if !seen {
			l = keyedAt(prev, obj, p[:i+1])
			lists[at] = l
		}
		if l != nil {
			return l
		}
	}
	return nil
}

// keyedAt returns the list at path if it is keyed, before and after.
func keyedAt(prev, obj *jsondoc.Doc, path jsondoc.Path) *keyed {
	old, oldOK := jsondoc.At(prev, path)
	now, nowOK := jsondoc.At(obj, path)
	if !oldOK || !nowOK || old[0] != '[' || now[0] != '[' {
		return nil
	}
	for _, k := range itemKeys {
		if before, ok := items(old, k); ok {
			if after, ok := items(now, k); ok {
				return &keyed{path: slices.Clone(path), key: k, before: before, after: after}
			}
		}
	}
	return nil
}

// items decodes list, an array of objects each with a distinct string
// member key, by that member, each item as it is written; ok is false
// for any other array.
func items(list []byte, key string) (byName map[string][]byte, ok bool) {
	var raw []json.RawMessage
	if json.Unmarshal(list, &raw) != nil || len(raw) == 0 {
		return nil, false
	}
	byName = map[string][]byte{}
	for _, item := range raw {
		var o map[string]json.RawMessage
		var name string
		if json.Unmarshal(item, &o) != nil || len(o[key]) == 0 || o[key][0] != '"' || json.Unmarshal(o[key], &name) != nil || byName[name] != nil {
			return nil, false
		}
		byName[name] = item
	}
	return byName, true
}

// keyedChanges compares a keyed list by its items' names.
func keyedChanges(l *keyed, name string) []change {
	var names []string
	for k := range l.before {
		names = append(names, k)
	}
	for k := range l.after {
		if l.before[k] == nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []change
	for _, k := range names {
		b, a := l.before[k], l.after[k]
		switch {
		case b == nil:
			out = append(out, change{name: name, mark: "+", summary: itemSummary(k, a, l.key)})
		case a == nil:
			out = append(out, change{name: name, mark: "-", summary: itemSummary(k, b, l.key)})
		case jsondoc.Diff(jsondoc.New(b), jsondoc.New(a)) != nil:
			out = append(out, change{name: name + "[" + k + "]", old: itemValue(b, l.key), now: itemValue(a, l.key), oldOK: true, nowOK: true})
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
