package jq

// IsIdentifier reports whether s has the syntax of a jq identifier: a
// letter or _, then letters, digits and _.
func IsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// IsKey reports whether .s is valid jq for the object key s: an
// identifier that is not a keyword.
func IsKey(s string) bool { return !keywords[s] && IsIdentifier(s) }

// keywords are jq's reserved words, which cannot follow a dot.
var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "if": true, "then": true, "elif": true, "else": true, "end": true,
	"as": true, "def": true, "reduce": true, "foreach": true, "try": true, "catch": true, "label": true,
	"import": true, "include": true, "__loc__": true,
}
