//go:build unix

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// readmeRecipes returns the shell snippets of README.md's section with
// the given heading ("## Recipes"), in order, which must be n, and a PATH
// with the built nodewatch and jq to run them with. The test skips where
// jq is not installed.
func readmeRecipes(t *testing.T, heading string, n int) (recipes []string, path string) {
	t.Helper()
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not installed (.ci/run installs it)")
	}
	recipes = readmeBlocks(t, heading, "sh")
	if len(recipes) != n {
		t.Fatalf("README's %q has %d recipes, this test knows %d", heading, len(recipes), n)
	}
	return recipes, filepath.Dir(binary(t)) + ":" + filepath.Dir(jq) + ":/usr/bin:/bin"
}

// readmeBlocks returns the code blocks in lang of README.md's section
// with the given heading, in order.
func readmeBlocks(t *testing.T, heading, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	end := strings.Index(text[start+1:], "\n## ")
	if end < 0 {
		end = len(text) - start - 1
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(text[start:start+1+end], -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// startSnippet runs a shell snippet with the variables env (and no
// others) in a process group of its own, killed when the test ends, and
// returns its output (stdout and stderr) and its end.
func startSnippet(t *testing.T, snippet string, env ...string) (*testkit.Buffer, <-chan error) {
	t.Helper()
	out, done, _ := startGroup(t, snippet, env)
	return out, done
}

// startGroup is startSnippet that also returns a kill of the whole
// process group (as systemd stops a unit), which waits for its end.
func startGroup(t *testing.T, snippet string, env []string) (out *testkit.Buffer, done <-chan error, kill func()) {
	t.Helper()
	cmd := exec.Command("bash", "-c", snippet)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out = &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		ended <- cmd.Wait()
		close(exited)
	}()
	kill = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	t.Cleanup(kill)
	return out, ended, kill
}

// TestE2EReadmeRecipes runs every recipe of the README, as written, with
// the built nodewatch and jq on PATH, against a live serve, and checks
// that each does what its sentence promises.
func TestE2EReadmeRecipes(t *testing.T) {
	t.Parallel()
	recipes, path := readmeRecipes(t, "## Recipes", 7)
	ep, c := etcdtest.StartWith(t)
	for _, id := range []string{idA, idB, idC} {
		putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_UP, "10.0.0."+id[:1]))
	}
	addr, _ := serve(t, ep)

	// recipe runs a snippet with bash; while it runs, act is called every
	// 200ms with what it printed so far (to make the changes the recipe
	// waits for).
	recipe := func(t *testing.T, snippet string, act func(i int, out string)) string {
		t.Helper()
		out, done := startSnippet(t, "reload-app() { echo \"reload-app $1\"; }\n"+snippet,
			"PATH="+path, "CURATOR="+addr, "NODEWATCH_CURATOR="+addr, "NODEWATCH_ETCD="+ep)
		deadline := time.After(timeout)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("recipe failed: %v\n%s", err, out)
				}
				return out.String()
			case <-tick.C:
				if act != nil {
					act(i, out.String())
				}
			case <-deadline:
				t.Fatalf("recipe timed out:\n%s", out)
			}
		}
	}

	t.Run("wait until three nodes are up", func(t *testing.T) {
		if out := recipe(t, recipes[0], nil); !strings.HasSuffix(out, "ready\n") {
			t.Fatalf("output %q", out)
		}
	})
	t.Run("wait until three nodes are up and healthy", func(t *testing.T) {
		// Their records carry no health yet (HEALTH_UNKNOWN): the run
		// waits until they say HEALTHY, and shows the updates.
		healthy := false
		out := recipe(t, recipes[1], func(_ int, out string) {
			// Once the run has its initial state (all UNKNOWN): before,
			// the records would be part of it.
			if healthy || !strings.Contains(out, "batch 1 (initial)") {
				return
			}
			healthy = true
			for _, id := range []string{idA, idB, idC} {
				putNodeHealth(t, c, id, "10.0.0."+id[:1], `"health":"HEALTHY"`)
			}
		})
		if strings.Count(out, " UP UNKNOWN 10.0.0.") != 3 || strings.Count(out, ".health: \"HEALTH_UNKNOWN\" → \"HEALTH_HEALTHY\"\n") != 3 {
			t.Fatalf("output %q; want three nodes UNKNOWN, then updates to HEALTHY", out)
		}
	})
	t.Run("what each update changed", func(t *testing.T) {
		// The pipeline never ends by itself: take its first line.
		snippet := strings.TrimSpace(recipes[4]) + " | head -n 1"
		out := recipe(t, snippet, func(i int, _ string) {
			putNode(t, c, node(idC, commonpb.NodeState_NODE_STATE_UP, "10.1.0."+strconv.Itoa(i)))
		})
		want := `^\{"id":"metropolis-c{32}","changes":\[\{"path":\["status","external_address"\],"old":"10\.[01]\.0\.[c\d]+","new":"10\.1\.0\.\d+"\}\]\}\n$`
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("output %q, want it to match %s", out, want)
		}
	})
	t.Run("count nodes by state", func(t *testing.T) {
		out := recipe(t, recipes[5], nil)
		if got := strings.Join(strings.Fields(out), ""); got != `{"NODE_STATE_UP":3}` {
			t.Fatalf("output %q", out)
		}
	})
	t.Run("react to each node that comes up", func(t *testing.T) {
		// The loop never ends by itself: stop it once it has reacted. A
		// node joins as NEW (no reaction), then comes UP with an address.
		snippet := strings.Replace(recipes[2], "done", "break; done", 1)
		out := recipe(t, snippet, func(i int, _ string) {
			id := strings.Repeat("d", 30) + itoa2(i/2)
			if i%2 == 0 {
				putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_NEW, ""))
			} else {
				putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_UP, "10.0.9."+strconv.Itoa(i/2)))
			}
		})
		if !regexp.MustCompile(`^up: metropolis-d{30}(\d\d) at 10\.0\.9\.\d+\n$`).MatchString(out) {
			t.Fatalf("output %q; want one line: up: ID at ADDRESS", out)
		}
	})
	t.Run("follow one etcd key", func(t *testing.T) {
		etcdtest.Put(t, c, "/config/app", `{"v":"initial"}`) // printed by nobody: --changes-only
		// nodewatch prints nothing while it lists, and a change made before
		// it lists is part of the initial state: change the value until a
		// reload shows that nodewatch follows, then put the same value
		// again (no reload) and delete the key.
		var last string // the last value put
		reput := false
		out := recipe(t, recipes[3], func(i int, out string) {
			switch {
			case !strings.Contains(out, "reload-app"):
				last = `{"v":` + strconv.Itoa(i) + `}`
				etcdtest.Put(t, c, "/config/app", last)
			case !reput:
				reput = true
				etcdtest.Put(t, c, "/config/app", last) // the same value: no reload
			default:
				etcdtest.Delete(t, c, "/config/app")
			}
		})
		if !regexp.MustCompile(`^(reload-app \{"v":\d+\}\n)+config removed\n$`).MatchString(out) || strings.Count(out, "reload-app "+last+"\n") != 1 {
			t.Fatalf("output %q; want reloads, one of them for %s (its re-put is no change), then config removed", out, last)
		}
	})
	t.Run("follow one etcd key that does not exist yet", func(t *testing.T) {
		// The key is gone (the case before deleted it): the recipe waits
		// for it; its creation is a reload, its deletion the end.
		created := false
		out := recipe(t, recipes[3], func(i int, out string) {
			switch {
			case !strings.Contains(out, "reload-app"):
				created = true
				etcdtest.Put(t, c, "/config/app", `{"v":`+strconv.Itoa(i)+`}`)
			default:
				etcdtest.Delete(t, c, "/config/app")
			}
		})
		if !created || !regexp.MustCompile(`^(reload-app \{"v":\d+\}\n)+config removed\n$`).MatchString(out) {
			t.Fatalf("output %q; want a reload once the key is created, then config removed", out)
		}
	})
	t.Run("stop at the first deletion", func(t *testing.T) {
		out := recipe(t, recipes[6], func(i int, _ string) {
			id := strings.Repeat("e", 30) + itoa2(i)
			if i%2 == 0 {
				putNode(t, c, node(id, commonpb.NodeState_NODE_STATE_NEW, ""))
			} else {
				etcdtest.Delete(t, c, curator.DefaultPrefix+"metropolis-"+strings.Repeat("e", 30)+itoa2(i-1))
			}
		})
		if !strings.HasPrefix(out, `{"type":"deleted","id":"metropolis-eeee`) || strings.Count(out, "\n") != 1 {
			t.Fatalf("output %q", out)
		}
	})
}

// TestE2EReadmeHealthRecipeDev: the README's recipe that waits for three
// nodes up and healthy passes, as written, against `serve --dev`, whose
// nodes send heartbeats (and now and then one misses them).
func TestE2EReadmeHealthRecipeDev(t *testing.T) {
	t.Parallel()
	recipes, path := readmeRecipes(t, "## Recipes", 7)
	addr, err := unusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv := command(t, "serve", "--dev", "--listen", addr)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }) // removes its etcd's directory
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "serving Curator Watch on "+addr) {
	}
	go io.Copy(io.Discard, stderr)

	// The simulation decides when all nodes are up and healthy at once: it
	// takes seconds to a minute, well within the recipe's own --timeout 5m.
	out, done := startSnippet(t, recipes[1], "PATH="+path, "CURATOR="+addr)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("recipe failed: %v\n%s", err, out)
		}
	case <-time.After(6 * time.Minute):
		t.Fatalf("recipe did not end:\n%s", out)
	}
	if !regexp.MustCompile(` UP +HEALTHY `).MatchString(out.String()) {
		t.Fatalf("output %q: no node UP and HEALTHY", out)
	}
}
