package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Platform is one GOOS/GOARCH a release ships.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "_" + p.Arch }

// exe is the file name of the binary name on p.
func (p Platform) exe(name string) string {
	if p.OS == "windows" {
		return name + ".exe"
	}
	return name
}

// Platforms are the platforms a release ships, in the order of its files.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// Binaries are the commands every archive holds.
var Binaries = []string{"nodewatch", "nodewatch-etcd"}

// Config says what to release, and from where.
type Config struct {
	Root, Dist string
	CycloneDX  string // the cyclonedx-gomod command
	CACerts    string // the CA bundle the image carries
}

// Stamp is what scripts/version.sh says of the tree.
type Stamp struct {
	Version string    // v0.1.0, v0.1.0-dev+g1a2b3c4d5e6f
	Commit  string    // empty without git
	Time    time.Time // every timestamp written (the commit's)
	LDFlags string
}

// Name is the version as file names carry it: without the "v".
func (s Stamp) Name() string { return strings.TrimPrefix(s.Version, "v") }

// readStamp asks scripts/version.sh, the one place that knows how a build
// is stamped, for the stamp and for the linker flags that carry it.
func readStamp(root string) (Stamp, error) {
	out, err := exec.Command("bash", filepath.Join(root, "scripts/version.sh")).Output()
	if err != nil {
		return Stamp{}, fmt.Errorf("scripts/version.sh: %w", err)
	}
	v := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, value, _ := strings.Cut(line, "=")
		v[name] = value
	}
	s := Stamp{Version: v["version"], Commit: v["commit"]}
	sec, err := strconv.ParseInt(v["epoch"], 10, 64)
	if err != nil || s.Version == "" {
		return Stamp{}, fmt.Errorf("scripts/version.sh printed %q", out)
	}
	s.Time = time.Unix(sec, 0).UTC()
	ld, err := exec.Command("bash", filepath.Join(root, "scripts/version.sh"), "-ldflags").Output()
	if err != nil {
		return Stamp{}, fmt.Errorf("scripts/version.sh -ldflags: %w", err)
	}
	s.LDFlags = strings.TrimSpace(string(ld))
	return s, nil
}

// Build builds every artifact into c.Dist and writes SHA256SUMS.
func Build(c Config) error {
	start := time.Now()
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return err
	}
	c.Root = root
	if c.Dist, err = filepath.Abs(c.Dist); err != nil {
		return err
	}
	st, err := readStamp(c.Root)
	if err != nil {
		return err
	}
	fmt.Printf("release: nodewatch %s (commit %s, %s) into %s\n", st.Version, st.Commit, st.Time.Format(time.RFC3339), c.Dist)
	if err := os.RemoveAll(c.Dist); err != nil {
		return err
	}
	bins := filepath.Join(c.Dist, "build")
	var artifacts []string
	step := func(what string, fn func() ([]string, error)) error {
		t := time.Now()
		names, err := fn()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		artifacts = append(artifacts, names...)
		fmt.Printf("release: %-9s %d files in %.1fs\n", what, len(names), time.Since(t).Seconds())
		return nil
	}
	if err := step("binaries", func() ([]string, error) { return nil, buildAll(c, st, bins) }); err != nil {
		return err
	}
	if err := step("sboms", func() ([]string, error) { return sboms(c, st) }); err != nil {
		return err
	}
	if err := step("archives", func() ([]string, error) { return archives(c, st, bins) }); err != nil {
		return err
	}
	if err := step("packages", func() ([]string, error) { return packages(c, st, bins) }); err != nil {
		return err
	}
	if err := step("image", func() ([]string, error) { return image(c, st, bins) }); err != nil {
		return err
	}
	if err := os.RemoveAll(bins); err != nil {
		return err
	}
	if err := writeSums(c.Dist, artifacts); err != nil {
		return err
	}
	fmt.Printf("release: %d artifacts and SHA256SUMS in %.0fs\n", len(artifacts), time.Since(start).Seconds())
	return nil
}

// buildAll builds each binary for each platform into dir/OS_ARCH/.
func buildAll(c Config, st Stamp, dir string) error {
	for _, p := range Platforms {
		args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", st.LDFlags, "-o", filepath.Join(dir, p.String()) + "/"}
		for _, b := range Binaries {
			args = append(args, "./cmd/"+b)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s: %w", p, err)
		}
	}
	return nil
}

// sboms writes a CycloneDX SBOM of each binary on each platform, from the
// module graph as that platform's build sees it: two at a time.
func sboms(c Config, st Stamp) ([]string, error) {
	type job struct {
		p    Platform
		bin  string
		name string
	}
	var jobs []job
	for _, p := range Platforms {
		for _, b := range Binaries {
			jobs = append(jobs, job{p, b, fmt.Sprintf("%s_%s_%s.%s.cdx.json", "nodewatch", st.Name(), p, b)})
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command(c.CycloneDX, "app", "-json", "-licenses", "-noserial", "-notimestamp",
				"-main", "cmd/"+j.bin, "-output", filepath.Join(c.Dist, j.name), ".")
			cmd.Dir = c.Root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+j.p.OS, "GOARCH="+j.p.Arch)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("%s: %w\n%s", j.name, err, stderr.Bytes())
			}
		}()
	}
	wg.Wait()
	names := make([]string, len(jobs))
	for i, j := range jobs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		names[i] = j.name
	}
	return names, nil
}

// writeSums writes SHA256SUMS over names (in dist), sorted, in the format
// of sha256sum(1), which `sha256sum -c SHA256SUMS` verifies.
func writeSums(dist string, names []string) error {
	names = slices.Sorted(slices.Values(names))
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dist, n))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return os.WriteFile(filepath.Join(dist, "SHA256SUMS"), []byte(b.String()), 0o644)
}
