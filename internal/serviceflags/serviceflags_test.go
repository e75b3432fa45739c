package serviceflags

import (
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/connflags"
	"github.com/nodewatch/nodewatch/internal/curator/server"
)

// parse runs Parse on serve's flags as args give them.
func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	var o *Options
	app := &cli.App{
		Name: "serve", Flags: Flags(), Writer: io.Discard, ErrWriter: io.Discard,
		Action: func(c *cli.Context) (err error) {
			o, err = Parse(c, connflags.Env{Getenv: func(string) string { return "" }, Stderr: io.Discard})
			return err
		},
	}
	if err := app.Run(append([]string{"serve"}, args...)); err != nil {
		t.Fatalf("serve %q: %v", args, err)
	}
	return o
}

// TestConnectionFlags: --max-connections, --idle-timeout and
// --reflection reach the server's Config and Limits, with their defaults.
func TestConnectionFlags(t *testing.T) {
	type got struct {
		MaxConns     int
		IdleTimeout  time.Duration
		NoReflection bool
	}
	tests := []struct {
		args []string
		want got
	}{
		{nil, got{server.DefaultMaxConns, server.DefaultIdleTimeout, false}},
		{[]string{"--max-connections", "10", "--idle-timeout", "30s", "--reflection=false"}, got{10, 30 * time.Second, true}},
		{[]string{"--reflection"}, got{server.DefaultMaxConns, server.DefaultIdleTimeout, false}},
	}
	for _, tt := range tests {
		o := parse(t, tt.args...)
		if diff := cmp.Diff(tt.want, got{o.MaxConns, o.Limits.IdleTimeout, o.NoReflection}); diff != "" {
			t.Errorf("serve %q (-want +got):\n%s", tt.args, diff)
		}
	}
}
