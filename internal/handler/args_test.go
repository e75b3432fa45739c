//go:build unix

package handler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/handler"
)

// TestRunEnv: Args are the command's positional parameters, kept whole
// (spaces, quotes, newlines), and RunEnv's environment replaces a batch's.
func TestRunEnv(t *testing.T) {
	t.Setenv("NODEWATCH_RENDER_TEST", "inherited")
	t.Setenv("NODEWATCH_BATCH", "inherited")
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"/a dir/it's", "two\nlines", ""}
	h := &handler.Handler{
		Command: `{ echo "$0" "$#"; printf '%s|' "$@"; echo; env | grep '^NODEWATCH_' | sort; } > ` + out,
		Args:    args,
	}
	if err := h.RunEnv(context.Background(), nil, []string{"NODEWATCH_RENDER_TEST=given", "NODEWATCH_RENDER_FILE=/x"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "sh 3\n" + strings.Join(args, "|") + "|\n" +
		"NODEWATCH_BATCH=inherited\nNODEWATCH_RENDER_FILE=/x\nNODEWATCH_RENDER_TEST=given\n"
	if string(b) != want {
		t.Errorf("the command wrote\n%s\nwant\n%s", b, want)
	}

	// Without Args, $0 is the shell's, as it always was for --exec.
	h = &handler.Handler{Command: `echo "$0" "$#" > ` + out}
	if err := h.Run(context.Background(), nil, done, 1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "/bin/sh 0\n" {
		t.Errorf("without Args, the command wrote %q", b)
	}
}
