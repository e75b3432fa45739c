//go:build unix

package handler_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handler"
)

// lineEnv is a ChangeEnv that gives the change's line as CHANGE_LINE.
type lineEnv struct{}

func (lineEnv) Vars() []string { return []string{"CHANGE_LINE", "CHANGE_OTHER"} }

func (lineEnv) Env(line []byte) []string { return []string{"CHANGE_LINE=" + string(line)} }

// TestChangeEnv: a batch of one change, whichever kind, gets the
// variables of ChangeEnv for its line, the first of the input; a batch of
// several gets none of them, not even those nodewatch's own environment
// has.
func TestChangeEnv(t *testing.T) {
	t.Setenv("CHANGE_LINE", "inherited")
	t.Setenv("CHANGE_OTHER", "inherited")
	input := []byte("{\"type\":\"new\",\"id\":\"/a\"}\n{\"type\":\"batch_done\"}\n")
	for _, c := range []struct {
		counts flow.Counts
		want   string
	}{
		{flow.Counts{New: 1}, "CHANGE_LINE={\"type\":\"new\",\"id\":\"/a\"}\n"},
		{flow.Counts{Updated: 1}, "CHANGE_LINE={\"type\":\"new\",\"id\":\"/a\"}\n"},
		{flow.Counts{Deleted: 1}, "CHANGE_LINE={\"type\":\"new\",\"id\":\"/a\"}\n"},
		{flow.Counts{New: 1, Deleted: 1}, ""},
		{flow.Counts{Updated: 3}, ""},
	} {
		var out bytes.Buffer
		h := &handler.Handler{Command: "env | grep '^CHANGE_' | sort", Stdout: &out, ChangeEnv: lineEnv{}}
		d := done
		d.Counts = c.counts
		if err := h.Run(context.Background(), input, d, 1); err != nil && c.want != "" {
			t.Fatal(err) // grep finding nothing exits 1
		}
		if diff := cmp.Diff(c.want, out.String()); diff != "" {
			t.Errorf("counts %+v: (-want +got)\n%s", c.counts, diff)
		}
	}
	// Without a ChangeEnv, the environment is nodewatch's.
	var out bytes.Buffer
	h := &handler.Handler{Command: "env | grep '^CHANGE_' | sort", Stdout: &out}
	if err := h.Run(context.Background(), input, done, 1); err != nil {
		t.Fatal(err)
	}
	if want := "CHANGE_LINE=inherited\nCHANGE_OTHER=inherited\n"; out.String() != want {
		t.Errorf("without a ChangeEnv: %q, want %q", out.String(), want)
	}
}
