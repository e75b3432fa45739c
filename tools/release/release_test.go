package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseReproducible runs make release twice, into two directories,
// from the tree the test is in: the two SHA256SUMS must be byte for byte
// the same, and what the first run left must pass Check. Then one byte of
// one archive changed must fail Check. It runs only under make
// release-test (NODEWATCH_RELEASE_TEST=1): it takes minutes.
func TestReleaseReproducible(t *testing.T) {
	if os.Getenv("NODEWATCH_RELEASE_TEST") == "" {
		t.Skip("make release-test runs this")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var sums [2][]byte
	dists := [2]string{t.TempDir(), t.TempDir()}
	for i, dist := range dists {
		cmd := exec.Command("make", "-C", root, "release", "DIST="+dist)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("make release #%d: %v", i+1, err)
		}
		if sums[i], err = os.ReadFile(filepath.Join(dist, "SHA256SUMS")); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two runs from one tree differ:\n%s\n---\n%s", sums[0], sums[1])
	}
	if err := Check(dists[0]); err != nil {
		t.Fatalf("Check: %v", err)
	}
	// Check must notice a change.
	var archive string
	for _, line := range strings.Split(string(sums[0]), "\n") {
		if strings.HasSuffix(line, "_linux_amd64.tar.gz") {
			archive = filepath.Join(dists[0], line[strings.LastIndex(line, " ")+1:])
		}
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(dists[0]); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("Check of a changed archive: %v, want a checksum that does not match", err)
	}
}
