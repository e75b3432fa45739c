package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// Check checks a release directory as a user would find it: SHA256SUMS
// verifies and names every kind of artifact for every platform; each
// archive holds the binaries and docs; each SBOM is CycloneDX and lists
// modules; the .deb installs the binaries, the man page and the three
// completions (dpkg-deb -x); the linux/amd64 binary is static and prints
// its real version; the image layout validates, and runs serve as a user
// that is not root.
func Check(dist string) error {
	names, err := verifySums(dist)
	if err != nil {
		return err
	}
	version, err := releasedVersion(names)
	if err != nil {
		return err
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	has := func(name string) bool { return slices.Contains(names, name) }
	for _, p := range Platforms {
		top := "nodewatch_" + version + "_" + p.String()
		archive := top + ".tar.gz"
		if p.OS == "windows" {
			archive = top + ".zip"
		}
		if !has(archive) {
			fail("no %s", archive)
		} else if listed, err := listArchive(filepath.Join(dist, archive)); err != nil {
			fail("%s: %v", archive, err)
		} else {
			for _, b := range Binaries {
				if !slices.Contains(listed, path.Join(top, p.exe(b))) {
					fail("%s lacks %s", archive, p.exe(b))
				}
			}
			for _, d := range docs {
				if !slices.Contains(listed, path.Join(top, d[1])) {
					fail("%s lacks %s", archive, d[1])
				}
			}
		}
		for _, b := range Binaries {
			sbom := top + "." + b + ".cdx.json"
			if !has(sbom) {
				fail("no %s", sbom)
			} else if err := checkSBOM(filepath.Join(dist, sbom)); err != nil {
				fail("%s: %v", sbom, err)
			}
		}
	}
	var debs, rpms int
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".deb"):
			debs++
			if err := checkDeb(filepath.Join(dist, n)); err != nil {
				fail("%s: %v", n, err)
			}
		case strings.HasSuffix(n, ".rpm"):
			rpms++
			if data, err := os.ReadFile(filepath.Join(dist, n)); err != nil || !bytes.HasPrefix(data, []byte{0xed, 0xab, 0xee, 0xdb}) {
				fail("%s: not an rpm (%v)", n, err)
			}
		}
	}
	if debs != 2 || rpms != 2 {
		fail("%d .deb and %d .rpm packages, want 2 of each (linux amd64 and arm64)", debs, rpms)
	}
	if err := checkBinary(dist, version); err != nil {
		fail("linux/amd64 nodewatch: %v", err)
	}
	if oci := "nodewatch_" + version + "_oci.tar"; !has(oci) {
		fail("no %s", oci)
	} else if err := checkImage(filepath.Join(dist, oci), version); err != nil {
		fail("%s: %v", oci, err)
	}
	if len(errs) == 0 {
		fmt.Printf("release: %s: %d artifacts of nodewatch %s check out\n", dist, len(names), version)
	}
	return errors.Join(errs...)
}

// verifySums checks every line of SHA256SUMS against its file, and
// returns the names it lists.
func verifySums(dist string) ([]string, error) {
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("SHA256SUMS: bad line %q", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			return nil, err
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			return nil, fmt.Errorf("SHA256SUMS: %s does not match", name)
		}
		names = append(names, name)
	}
	return names, sc.Err()
}

// releasedVersion reads the version from the name of the linux/amd64
// archive.
func releasedVersion(names []string) (string, error) {
	for _, n := range names {
		if v, ok := strings.CutSuffix(strings.TrimPrefix(n, "nodewatch_"), "_linux_amd64.tar.gz"); ok && v != n {
			return v, nil
		}
	}
	return "", errors.New("SHA256SUMS lists no nodewatch_VERSION_linux_amd64.tar.gz")
}

// listArchive returns the names of the files in a .tar.gz or a .zip.
func listArchive(file string) ([]string, error) {
	var names []string
	if strings.HasSuffix(file, ".zip") {
		zr, err := zip.OpenReader(file)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		return names, nil
	}
	err := eachInTarGz(file, func(h *tar.Header, _ io.Reader) error {
		names = append(names, strings.TrimSuffix(h.Name, "/"))
		return nil
	})
	return names, err
}

func eachInTarGz(file string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	return eachInTar(zr, fn)
}

func eachInTar(r io.Reader, fn func(*tar.Header, io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

func checkSBOM(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var bom struct {
		BOMFormat  string            `json:"bomFormat"`
		Components []json.RawMessage `json:"components"`
		Metadata   struct {
			Component struct{ Name string } `json:"component"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		return err
	}
	if bom.BOMFormat != "CycloneDX" || len(bom.Components) == 0 || bom.Metadata.Component.Name != "github.com/nodewatch/nodewatch" {
		return fmt.Errorf("not a CycloneDX SBOM of nodewatch's modules (format %q, %d components)", bom.BOMFormat, len(bom.Components))
	}
	return nil
}

// checkDeb unpacks a .deb with dpkg-deb -x and looks for what it must
// install.
func checkDeb(file string) error {
	dir, err := os.MkdirTemp("", "release-deb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("dpkg-deb", "-x", file, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x: %v: %s", err, out)
	}
	var missing []string
	for _, f := range installed {
		if f.packager == "rpm" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, f.dst)); err != nil {
			missing = append(missing, f.dst)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("installs no %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkBinary takes nodewatch out of the linux/amd64 archive, checks that
// it is statically linked, and, where it can run, that --version names
// the release.
func checkBinary(dist, version string) error {
	top := "nodewatch_" + version + "_linux_amd64"
	var bin []byte
	err := eachInTarGz(filepath.Join(dist, top+".tar.gz"), func(h *tar.Header, r io.Reader) error {
		if h.Name == top+"/nodewatch" {
			var err error
			bin, err = io.ReadAll(r)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return err
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return errors.New("dynamically linked")
		}
	}
	dir, err := os.MkdirTemp("", "release-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	exe := filepath.Join(dir, "nodewatch")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(exe, "--version").Output()
	if errors.Is(err, exec.ErrNotFound) || (err != nil && strings.Contains(err.Error(), "exec format error")) {
		return nil // another architecture than this machine's
	}
	if err != nil {
		return fmt.Errorf("--version: %v", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if first != "nodewatch v"+version {
		return fmt.Errorf("--version says %q, want %q", first, "nodewatch v"+version)
	}
	return nil
}

// checkImage unpacks the OCI layout archive, validates the index and
// every image in it (digests, sizes, config against layers), and checks
// each image's config: serve as the entrypoint, a user that is not root,
// and the OCI labels.
func checkImage(file, version string) error {
	dir, err := os.MkdirTemp("", "release-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	err = eachInTar(f, func(h *tar.Header, r io.Reader) error {
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			return os.MkdirAll(p, 0o755)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	})
	if err != nil {
		return err
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return err
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		return fmt.Errorf("index.json: want one index named %s", version)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := validate.Index(idx); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var platforms []string
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		platforms = append(platforms, cf.OS+"/"+cf.Architecture)
		c := cf.Config
		user, _, _ := strings.Cut(c.User, ":")
		switch {
		case user == "" || user == "0" || user == "root":
			return fmt.Errorf("%s: runs as root (user %q)", d.Platform, c.User)
		case !slices.Equal(c.Entrypoint, Entrypoint):
			return fmt.Errorf("%s: entrypoint %q, want %q", d.Platform, c.Entrypoint, Entrypoint)
		case c.Labels["org.opencontainers.image.version"] != "v"+version,
			c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0",
			c.Labels["org.opencontainers.image.source"] == "":
			return fmt.Errorf("%s: labels %v", d.Platform, c.Labels)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		return fmt.Errorf("images for %v, want linux/amd64 and linux/arm64", platforms)
	}
	return nil
}
