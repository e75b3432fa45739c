package connflags

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/console"
)

// etcdUser splits --user NAME[:PASSWORD]. Without a password it comes
// from NODEWATCH_PASSWORD, or else is asked for on the terminal stdin is
// (without echo). No error names the password.
func etcdUser(ctx context.Context, e Env, user string) (name, password string, err error) {
	name, password, _ = strings.Cut(user, ":")
	if name == "" {
		return "", "", cmdline.Usagef("--user: no user name before the colon (want NAME[:PASSWORD])")
	}
	if password == "" {
		password = e.Getenv("NODEWATCH_PASSWORD")
	}
	if password != "" {
		return name, password, nil
	}
	f, ok := e.Stdin.(*os.File)
	if !ok || !console.IsTerminal(f) {
		return "", "", cmdline.Usagef("--user %s: no password: give --user NAME:PASSWORD, set NODEWATCH_PASSWORD, or run on a terminal to be asked for it", name)
	}
	password, err = console.ReadPassword(ctx, int(f.Fd()), func() {
		fmt.Fprintf(e.Stderr, "nodewatch: password for etcd user %s: ", name)
	})
	fmt.Fprintln(e.Stderr)
	switch {
	case errors.Is(err, context.Canceled):
		return "", "", err
	case err != nil:
		return "", "", fmt.Errorf("--user %s: read the password: %w", name, err)
	case password == "":
		return "", "", cmdline.Usagef("--user %s: the password is empty", name)
	}
	return name, password, nil
}
