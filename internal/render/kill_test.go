//go:build unix

package render_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/render"
)

// A version's content: a header that says which it is, how long its body
// is and the body's checksum, then the body, 1 to 4 MiB of a random pool
// of letters, from an offset of its own.
const (
	versionHeader = "nodewatch-render-kill v=%d size=%d crc=%08x\n"
	poolSize      = 5 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// versionOf returns version v's content, the view the child renders
// with the program `.` (to which jq -r adds a newline).
func versionOf(pool []byte, v int) string {
	rng := rand.New(rand.NewPCG(uint64(v), 7))
	size := 1<<20 + rng.IntN(3<<20)
	off := rng.IntN(len(pool) - size)
	body := pool[off : off+size]
	return fmt.Sprintf(versionHeader, v, size, crc32.Checksum(body, castagnoli)) + string(body)
}

// checkVersion returns the version that b is, all of it, or an error
// that says what is wrong with it.
func checkVersion(b []byte) (int, error) {
	header, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return 0, fmt.Errorf("%d bytes without a header", len(b))
	}
	var v, size int
	var crc uint32
	if _, err := fmt.Sscanf(string(header)+"\n", versionHeader, &v, &size, &crc); err != nil {
		return 0, fmt.Errorf("header %.80q: %v", header, err)
	}
	if len(rest) != size+1 || rest[size] != '\n' {
		return v, fmt.Errorf("version %d: %d bytes after the header, want %d and a newline", v, len(rest), size)
	}
	if got := crc32.Checksum(rest[:size], castagnoli); got != crc {
		return v, fmt.Errorf("version %d: checksum %08x, want %08x", v, got, crc)
	}
	return v, nil
}

// renderVersions is the child of TestKillWhileWriting: a new Renderer
// renders version after version to to, from first on, until it is
// killed; it prints "ready" once the first is in place.
func renderVersions(t *testing.T, to string, first int) {
	pool := make([]byte, poolSize)
	rand.NewChaCha8([32]byte{byte(first), byte(first >> 8), byte(first >> 16), byte(first >> 24)}).Read(pool)
	for i, c := range pool {
		pool[i] = 'a' + c%26
		if c < 4 {
			pool[i] = '\n'
		}
	}
	r := &render.Renderer{Targets: []render.Target{{Program: program(t, "."), To: to}}}
	for v := first; ; v++ {
		renderOK(t, r, versionOf(pool, v))
		if v == first {
			fmt.Println("ready")
		}
	}
}

// TestKillWhileWriting: a SIGKILL at any moment, in many rounds, never
// leaves the file but as one whole version; what a killed run left
// half-written beside it, the next one's Renderer removes.
func TestKillWhileWriting(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	dir := t.TempDir()
	to := filepath.Join(dir, "big.conf")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	last, whileWriting := -1, 0
	var stale []string
	for round := range rounds {
		c := startChild(t, "", nil, childEnv+"=kill", childTo+"="+to, childFirst+"="+strconv.Itoa(round*1_000_000))
		c.waitFor(t, "ready")
		for _, name := range stale {
			if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("round %d: %s, which the round before left, is still there (%v)", round, name, err)
			}
		}
		sleepCtx(context.Background(), time.Duration(rng.IntN(60_000))*time.Microsecond)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.cmd.Wait()
		b, err := os.ReadFile(to)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		v, err := checkVersion(b)
		if err != nil {
			t.Fatalf("round %d: the file is not one whole version: %v", round, err)
		}
		if v < last || v < round*1_000_000 {
			t.Fatalf("round %d: version %d, after %d", round, v, last)
		}
		last = v
		if stale = temps(t, dir); len(stale) > 0 {
			whileWriting++
		}
	}
	t.Logf("%d rounds, %d killed while a temporary file was there, the last at version %d", rounds, whileWriting, last%1_000_000)
	if whileWriting == 0 && !testing.Short() {
		t.Errorf("no round was killed while writing: the test proves little")
	}
	r := &render.Renderer{Targets: []render.Target{{Program: program(t, "."), To: to}}}
	log := logs(r)
	renderOK(t, r, "after")
	noTemps(t, dir)
	if n := countLines(log.String(), "which an earlier run left half-written"); n != len(stale) {
		t.Errorf("%d removals logged, want %d:\n%s", n, len(stale), log)
	}
}
