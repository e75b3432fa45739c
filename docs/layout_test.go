package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayout: the README's layout table names only paths that
// exist, and every package under internal/ (but testkit's own) and every
// top-level directory.
func TestReadmeLayout(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README has no ## Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	named := map[string]bool{}
	for _, line := range strings.Split(layout, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range regexp.MustCompile("`([^`]+/)`").FindAllStringSubmatch(first, -1) {
			named[m[1]] = true
			if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
				t.Errorf("the layout table names %s: %v", m[1], err)
			}
		}
	}
	covered := func(dir string) bool {
		for n := range named {
			if strings.HasPrefix(n, dir) {
				return true
			}
		}
		return false
	}
	dirs, _ := filepath.Glob("../internal/*")
	top, _ := filepath.Glob("../*")
	for _, d := range append(dirs, top...) {
		p := filepath.ToSlash(strings.TrimPrefix(d, "../")) + "/"
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || p == "internal/" || p == "bin/" || p == "dist/" || strings.HasPrefix(p, ".") {
			continue
		}
		if !covered(p) {
			t.Errorf("the layout table does not name %s", p)
		}
	}
}
