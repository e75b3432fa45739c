package etcdkv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeyPattern(t *testing.T) {
	const exported = "/_mgmt/exported/{to}/{from}/{kind}/{name...}"
	for _, c := range []struct {
		pattern, key string
		want         []Field // nil: no match
	}{
		{exported, "/_mgmt/exported/*/h1/file//tmp/foo", []Field{{"to", "*"}, {"from", "h1"}, {"kind", "file"}, {"name", "/tmp/foo"}}},
		{exported, "/_mgmt/exported/h2/h1/svc/nginx", []Field{{"to", "h2"}, {"from", "h1"}, {"kind", "svc"}, {"name", "nginx"}}},
		{exported, "/_mgmt/exported/h2/h1/svc/", []Field{{"to", "h2"}, {"from", "h1"}, {"kind", "svc"}, {"name", ""}}},
		{exported, "/_mgmt/exported/h2/h1/svc", nil},
		{exported, "/_mgmt/strings/k/h1", nil},
		{"/_mgmt/strings/{key}/{host}", "/_mgmt/strings/k/h1", []Field{{"key", "k"}, {"host", "h1"}}},
		{"/_mgmt/strings/{key}/{host}", "/_mgmt/strings/k", nil},
		{"/_mgmt/strings/{key}/{host}", "/_mgmt/strings/k/h1/x", nil},
		{"/a/{x}", "/a/", []Field{{"x", ""}}},
	} {
		p, err := ParseKeyPattern(c.pattern)
		if err != nil {
			t.Fatalf("ParseKeyPattern(%q): %v", c.pattern, err)
		}
		got, ok := p.Match(c.key)
		if ok != (c.want != nil) || !cmp.Equal(c.want, got) {
			t.Errorf("%s.Match(%q) = %v, %v; want %v", c.pattern, c.key, got, ok, c.want)
		}
	}
}

func TestKeyPatternErrors(t *testing.T) {
	for pattern, want := range map[string]string{
		"/a/b":           "names no segment",
		"/a/x{y}":        "whole segment",
		"/a/{y}/{y}":     "named twice",
		"/a/{rest...}/b": "must come last",
		"/a/{1x}":        "letters, digits",
		"/a/{}":          "letters, digits",
		"/a/{x.y}":       "letters, digits",
	} {
		if _, err := ParseKeyPattern(pattern); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKeyPattern(%q) = %v, want an error saying %q", pattern, err, want)
		}
	}
}
