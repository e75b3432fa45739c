package etcdkv

import (
	"fmt"
	"strings"

	"github.com/nodewatch/nodewatch/internal/jq"
)

// KeyPattern names the segments of keys, so that what a key's path says
// (a host, a kind, a name) becomes fields of its object that jq can select
// on, e.g.
//
//	/_mgmt/exported/{to}/{from}/{kind}/{name...}
//
// A pattern is a path of segments separated by "/": a literal segment
// must equal the key's segment; {NAME} takes the key's segment, whatever
// it is (the empty one too); {NAME...}, last only, takes the rest of the
// key, its segments joined with "/" again (a file's path).
type KeyPattern struct {
	text  string
	parts []patternPart
}

type patternPart struct {
	literal string
	name    string // a capture when not ""
	rest    bool
}

// Field is one named segment of a key.
type Field struct {
	Name, Value string
}

// ParseKeyPattern parses a pattern; the error names what is wrong.
func ParseKeyPattern(s string) (*KeyPattern, error) {
	p := &KeyPattern{text: s}
	seen := map[string]bool{}
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		if !strings.ContainsAny(seg, "{}") {
			p.parts = append(p.parts, patternPart{literal: seg})
			continue
		}
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			return nil, fmt.Errorf("segment %q: a {NAME} must be a whole segment", seg)
		}
		name := seg[1 : len(seg)-1]
		rest := strings.HasSuffix(name, "...")
		name = strings.TrimSuffix(name, "...")
		if !jq.IsIdentifier(name) {
			return nil, fmt.Errorf("segment %q: a name is letters, digits and _, not starting with a digit", seg)
		}
		if seen[name] {
			return nil, fmt.Errorf("{%s} is named twice", name)
		}
		seen[name] = true
		if rest && i != len(segs)-1 {
			return nil, fmt.Errorf("segment %q: {%s...} takes the rest of the key, so it must come last", seg, name)
		}
		p.parts = append(p.parts, patternPart{name: name, rest: rest})
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%q names no segment (want e.g. /app/{env}/{name})", s)
	}
	return p, nil
}

// Names returns the names of the pattern's segments, in order.
func (p *KeyPattern) Names() []string {
	var names []string
	for _, part := range p.parts {
		if part.name != "" {
			names = append(names, part.name)
		}
	}
	return names
}

// String returns the pattern as written.
func (p *KeyPattern) String() string { return p.text }

// Match returns the named segments of key in the pattern's order, and
// whether key matches.
func (p *KeyPattern) Match(key string) ([]Field, bool) {
	segs := strings.Split(key, "/")
	var fields []Field
	for i, part := range p.parts {
		if i >= len(segs) {
			return nil, false
		}
		switch {
		case part.rest:
			return append(fields, Field{part.name, strings.Join(segs[i:], "/")}), true
		case part.name != "":
			fields = append(fields, Field{part.name, segs[i]})
		case segs[i] != part.literal:
			return nil, false
		}
	}
	if len(segs) != len(p.parts) {
		return nil, false
	}
	return fields, true
}
