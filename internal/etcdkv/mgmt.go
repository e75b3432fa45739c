package etcdkv

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// mgmt (the config management engine) keeps its World in etcd under a
// namespace, /_mgmt by default: strings, per-host string maps, exported
// resources (gob), deploys and its scheduler. Mgmt is a watch on one area
// of it, with its keys' segments named, its values decoded, and mgmt's own
// collect semantics as a jq filter.
type Mgmt struct {
	// Keys are the prefixes to follow: the area's, or what CollectFor
	// narrows it to.
	Keys []string
	// Rules name the segments of the area's keys and decode their values.
	Rules []Rule
	// Filter is a jq expression over the objects that the selections add
	// up to ("" for none).
	Filter string

	conds []string
	ns    string
}

// mgmtRule is a pattern (after the namespace) and how the values of the
// keys it matches are decoded.
type mgmtRule struct {
	pattern string
	value   ValueMode
}

// mgmtAreas are mgmt's areas: the directory under the namespace and the
// layout of their keys, most specific pattern first.
var mgmtAreas = map[string][]mgmtRule{
	"exported": {{"/exported/{to}/{from}/{kind}/{name...}", ValueGob}},
	// A Str and a StrMap entry share /strings/: KEY/HOST is a map's.
	"strings": {{"/strings/{key}/{host}", ValueText}, {"/strings/{key}", ValueText}},
	"scheduler": {
		{"/scheduler/hostname/{host}/{namespace}", ValueQuery},
		{"/scheduler/schedule/{namespace}", ValueText},
		{"/scheduler/election/{lease}", ValueText},
	},
	"deploy": {{"/deploy/{id}/payload", ValueGob}, {"/deploy/{id}/hash", ValueText}},
}

// ErrUnknownArea is wrapped by MgmtArea's error for an area mgmt does not
// have.
var ErrUnknownArea = errors.New("unknown area")

// MgmtAreas returns the names of mgmt's areas, sorted.
func MgmtAreas() []string {
	var names []string
	for a := range mgmtAreas {
		names = append(names, a)
	}
	sort.Strings(names)
	return names
}

// MgmtArea returns the watch on area (one of MgmtAreas) of the World
// under the namespace ns (a key prefix starting with /).
func MgmtArea(area, ns string) (*Mgmt, error) {
	rules, ok := mgmtAreas[area]
	if !ok {
		return nil, fmt.Errorf("%w %q (want %s)", ErrUnknownArea, area, strings.Join(MgmtAreas(), ", "))
	}
	trimmed := strings.TrimSuffix(ns, "/")
	if !strings.HasPrefix(trimmed, "/") {
		return nil, fmt.Errorf("want a key prefix starting with /, got %q", ns)
	}
	dir := strings.SplitN(rules[0].pattern, "/", 3)[1]
	m := &Mgmt{Keys: []string{trimmed + "/" + dir + "/"}, ns: trimmed}
	for _, r := range rules {
		p, err := ParseKeyPattern(trimmed + r.pattern)
		if err != nil {
			return nil, err
		}
		m.Rules = append(m.Rules, Rule{Pattern: p, Value: r.value})
	}
	return m, nil
}

// Select keeps only the objects whose field (a segment the area's
// patterns name: kind, name, from) is value.
func (m *Mgmt) Select(field, value string) {
	m.add(".fields." + field + " == " + jqString(value))
}

// CollectFor narrows exported resources to what mgmt on host collects:
// those exported to host or to every host (*). etcd narrows to the two
// prefixes; the filter keeps keys that the pattern does not match (no
// fields) out.
func (m *Mgmt) CollectFor(host string) error {
	if host == "" || strings.Contains(host, "/") {
		return fmt.Errorf("want a host name, got %q", host)
	}
	m.Keys = []string{m.ns + "/exported/" + host + "/"}
	if host != "*" {
		m.Keys = append(m.Keys, m.ns+"/exported/*/")
	}
	m.add("(.fields.to == " + jqString(host) + " or .fields.to == \"*\")")
	return nil
}

func (m *Mgmt) add(cond string) {
	m.conds = append(m.conds, cond)
	m.Filter = strings.Join(m.conds, " and ")
}

// jqString returns s as a jq string literal (a JSON string is one).
func jqString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
