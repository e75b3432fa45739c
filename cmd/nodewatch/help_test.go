package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nodewatch/nodewatch/internal/cmdline"
)

// TestHelpFits: with stdout not a terminal, no line of the help of
// nodewatch or of any of its commands (hidden ones too) is wider than 80
// columns, and every help ends with exit 0 and nothing on stderr.
func TestHelpFits(t *testing.T) {
	t.Parallel()
	runs := [][]string{{"--help"}, {"-h"}, {"help"}}
	for _, c := range newApp(&env{}).Commands {
		runs = append(runs, []string{c.Name, "--help"}, []string{"help", c.Name})
	}
	for _, args := range runs {
		if args[0] == "help" && len(args) == 2 && (args[1] == "help" || args[1] == "man") {
			continue // not a topic of help
		}
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		if code := runEnv(context.Background(), e, args); code != exitOK || stderr.Len() > 0 || stdout.Len() == 0 {
			t.Errorf("nodewatch %s: exit %d, stderr %q, %d bytes of help", strings.Join(args, " "), code, stderr.String(), stdout.Len())
		}
		for i, l := range strings.Split(stdout.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > cmdline.DefaultHelpWidth {
				t.Errorf("nodewatch %s: line %d is %d columns wide: %s", strings.Join(args, " "), i+1, n, l)
			}
		}
	}
}
