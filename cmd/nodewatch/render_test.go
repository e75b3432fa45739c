//go:build unix

package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// TestE2EReadmeRender runs the README's --render recipe, as written,
// against serve --dev, whose simulated fleet sends heartbeats and now
// and then changes a node. systemctl is a script that notes what the
// two files held at each reload. The files end up holding the nodes
// that are up; every reload follows a change of their content (none is
// for a heartbeat), and there were fewer reloads than heartbeats.
func TestE2EReadmeRender(t *testing.T) {
	t.Parallel()
	recipes := readmeBlocks(t, "## Files kept in step with the cluster", "sh")
	if len(recipes) != 1 {
		t.Fatalf("README's render section has %d recipes, this test knows 1", len(recipes))
	}
	addr, err := embedetcd.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv := command(t, "serve", "--dev", "--listen", addr, "--dev-rate", "10")
	_, srvErr := startLines(t, srv)
	testkit.Eventually(t, func() error {
		if code, _, stderr := runCmd(t, command(t, "nodes", "--curator", addr, "--once", "--dial-timeout", "1s")); code != 0 {
			return fmt.Errorf("serve --dev not serving yet: %s; %s", stderr, srvErr)
		}
		return nil
	})

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	reloads := filepath.Join(dir, "reloads")
	os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\n{ echo \"$*\"; cat nodes.hosts backends.cfg | sha256sum; } >> \""+reloads+"\"\n"), 0o755)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	out, done := startSnippet(t, "cd "+work+"\n"+recipes[0], "PATH="+bin+":"+filepath.Dir(binary(t))+":/usr/bin:/bin", "CURATOR="+addr)

	// Heartbeats, as a second watcher sees them: updates of the
	// timestamp alone.
	lines, _ := startLines(t, command(t, "nodes", "--curator", addr, "--changes-only"))
	heartbeats := 0
	for heartbeats < 40 {
		select {
		case l := <-lines:
			if strings.Contains(l, `"changed":[["status","timestamp"]]`) {
				heartbeats++
			}
		case err := <-done:
			t.Fatalf("the recipe ended: %v\n%s", err, out)
		case <-time.After(timeout):
			t.Fatalf("%d heartbeats in %v", heartbeats, timeout)
		}
	}

	// The files hold the nodes that are up (once the last change settled).
	testkit.Eventually(t, func() error {
		code, stdout, stderr := runCmd(t, command(t, "nodes", "--curator", addr, "--once", "--filter", `.state == "NODE_STATE_UP"`, "-o", "json"))
		if code != 0 {
			return fmt.Errorf("nodes --once: %s", stderr)
		}
		var hosts, backends []string
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			ev := parseLine[struct {
				Type   string
				ID     string
				Object struct {
					Status struct {
						ExternalAddress string `json:"external_address"`
					}
				}
			}](t, l)
			if ev.Type == "new" {
				a := ev.Object.Status.ExternalAddress
				hosts = append(hosts, a+" "+ev.ID)
				backends = append(backends, "    server "+ev.ID+" "+a+":443 check")
			}
		}
		for file, want := range map[string][]string{"nodes.hosts": hosts, "backends.cfg": backends} {
			b, _ := os.ReadFile(filepath.Join(work, file))
			if got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); !slices.Equal(got, want) {
				return fmt.Errorf("%s holds %q, want %q", file, got, want)
			}
		}
		return nil
	})

	b, err := os.ReadFile(reloads)
	if err != nil {
		t.Fatalf("no reload: %v\n%s", err, out)
	}
	entries := strings.Split(strings.TrimSpace(string(b)), "\n")
	var sums []string
	for i := 0; i+1 < len(entries); i += 2 {
		if entries[i] != "reload haproxy" {
			t.Fatalf("systemctl ran with %q", entries[i])
		}
		sums = append(sums, entries[i+1])
	}
	for i := 1; i < len(sums); i++ {
		if sums[i] == sums[i-1] {
			t.Errorf("reload %d came without a change of the files (%s)", i+1, sums[i])
		}
	}
	if len(sums) == 0 || len(sums) >= heartbeats {
		t.Errorf("%d reloads for %d heartbeats", len(sums), heartbeats)
	}
	t.Logf("%d heartbeats, %d reloads; content %x", heartbeats, len(sums), sha256.Sum256(b))
}
