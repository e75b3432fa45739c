//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
	"github.com/nodewatch/nodewatch/internal/testkit/unitfile"
)

// TestE2EReadmeCronRecipe runs the README's "Replacing a cron job", as
// written, against a live serve: the inventory follows the nodes that are
// up; after a kill (of the whole process group, as systemd stops a unit),
// what changed meanwhile reaches it, deletions included. The unit file
// is deploy/'s, passes systemd-analyze verify, and its ExecStart, run as
// systemd would split it, does the same.
func TestE2EReadmeCronRecipe(t *testing.T) {
	t.Parallel()
	recipes, path := readmeRecipes(t, "## Replacing a cron job", 2)
	ep, c := etcdtest.StartWith(t)
	putNode(t, c, node(idA, commonpb.NodeState_NODE_STATE_UP, "10.0.0.1"))
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_NEW, ""))
	addr, _ := serve(t, ep)
	work, inv := t.TempDir(), t.TempDir()
	env := []string{"PATH=" + path, "HOME=" + work, "XDG_STATE_HOME=" + filepath.Join(work, "state"), "INVENTORY=" + inv, "CURATOR=" + addr}
	inWork := func(snippet string) string { return "cd " + work + "\n" + snippet }
	if out, err := runSnippet(inWork(recipes[0]), env); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	inventory := func(dir string, want map[string]string) {
		t.Helper()
		testkit.Eventually(t, func() error {
			got := map[string]string{}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				got[filepath.Base(f)] = strings.TrimSpace(string(b))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("inventory %v, want %v", got, want)
			}
			return nil
		})
	}
	a, b, cc := "metropolis-"+idA, "metropolis-"+idB, "metropolis-"+idC
	out, _, kill := startGroup(t, inWork(recipes[1]), env)
	inventory(inv, map[string]string{a: "10.0.0.1"})
	putNode(t, c, node(idB, commonpb.NodeState_NODE_STATE_UP, "10.0.0.2"))
	inventory(inv, map[string]string{a: "10.0.0.1", b: "10.0.0.2"})

	// Down: the recipe's process group killed. Meanwhile A goes, C comes.
	kill()
	etcdtest.Delete(t, c, curator.DefaultPrefix+a)
	putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_UP, "10.0.0.3"))
	out2, _, _ := startGroup(t, inWork(recipes[1]), env)
	inventory(inv, map[string]string{b: "10.0.0.2", cc: "10.0.0.3"})
	if s := out.String() + out2.String(); s != "" {
		t.Errorf("the recipe printed %q", s)
	}

	// The unit: deploy/'s, as the README shows it.
	units := readmeBlocks(t, "## Replacing a cron job", "ini")
	if len(units) != 1 {
		t.Fatalf("README's cron recipe has %d unit files, want 1", len(units))
	}
	unit := units[0]
	if b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nodewatch-inventory.service")); err != nil || string(b) != unit {
		t.Fatalf("deploy/nodewatch-inventory.service differs from the README's unit (%v)", err)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs systemd)")
	}
	bin := t.TempDir()
	if err := os.Symlink(binary(t), filepath.Join(bin, "nodewatch")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "on-nodes.sh"), filepath.Join(bin, "on-nodes.sh")); err != nil {
		t.Fatal(err)
	}
	unitDir := t.TempDir()
	unitFile := filepath.Join(unitDir, "nodewatch-inventory.service")
	if err := os.WriteFile(unitFile, []byte(strings.ReplaceAll(unit, "/usr/local/bin/", bin+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := exec.Command("systemd-analyze", "verify", unitFile)
	if b, err := verify.CombinedOutput(); err != nil || len(b) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, b)
	}

	// ExecStart, split as systemd splits it, with the unit's environment
	// (the Curator and the inventory replaced) and a state directory.
	sections, err := unitfile.Parse(unit)
	if err != nil {
		t.Fatalf("the README's unit: %v", err)
	}
	execStart, _ := sections["Service"].Last("ExecStart")
	args, err := unitfile.SplitExec(execStart)
	if err != nil {
		t.Fatalf("ExecStart=%s: %v", execStart, err)
	}
	stateDir, inv2 := t.TempDir(), t.TempDir()
	for i, a := range args {
		args[i] = strings.NewReplacer("/var/lib/nodewatch-inventory", stateDir, "/usr/local/bin/", bin+"/").Replace(a)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	svcOut, _, _ := startGroup(t, "exec "+strings.Join(quoted, " "), []string{"PATH=" + path, "NODEWATCH_CURATOR=" + addr, "INVENTORY=" + inv2})
	inventory(inv2, map[string]string{b: "10.0.0.2", cc: "10.0.0.3"})
	if _, err := os.Stat(filepath.Join(stateDir, "inventory.db")); err != nil {
		t.Fatalf("the unit's state file: %v; output %s", err, svcOut)
	}
}

// runSnippet runs a shell snippet to its end with env.
func runSnippet(snippet string, env []string) (string, error) {
	cmd := exec.Command("bash", "-c", snippet)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
