package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// installed is where a package puts each file, by packager ("" for both):
// the binaries in /usr/bin, the man page gzipped, and each shell's
// completion where that shell looks for packaged ones (zsh's differs
// between Debian and Fedora).
var installed = []struct{ src, dst, packager string }{
	{"bin:nodewatch", "/usr/bin/nodewatch", ""},
	{"bin:nodewatch-etcd", "/usr/bin/nodewatch-etcd", ""},
	{"gz:docs/nodewatch.1", "/usr/share/man/man1/nodewatch.1.gz", ""},
	{"completions/nodewatch.bash", "/usr/share/bash-completion/completions/nodewatch", ""},
	{"completions/_nodewatch", "/usr/share/zsh/vendor-completions/_nodewatch", "deb"},
	{"completions/_nodewatch", "/usr/share/zsh/site-functions/_nodewatch", "rpm"},
	{"completions/nodewatch.fish", "/usr/share/fish/vendor_completions.d/nodewatch.fish", ""},
	{"LICENSE", "/usr/share/doc/nodewatch/copyright", "deb"},
	{"LICENSE", "/usr/share/licenses/nodewatch/LICENSE", "rpm"},
	{"NOTICE", "/usr/share/doc/nodewatch/NOTICE", ""},
}

// packages writes a .deb and an .rpm for each linux platform.
func packages(c Config, st Stamp, bins string) ([]string, error) {
	staged := filepath.Join(bins, "pkg")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		return nil, err
	}
	// The man page, gzipped as man-db reads it (no name, no time).
	man, err := os.ReadFile(filepath.Join(c.Root, "docs/nodewatch.1"))
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(man)
	zw.Close()
	manGz := filepath.Join(staged, "nodewatch.1.gz")
	if err := os.WriteFile(manGz, gz.Bytes(), 0o644); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range Platforms {
		if p.OS != "linux" {
			continue
		}
		for _, format := range []string{"deb", "rpm"} {
			var contents files.Contents
			for _, f := range installed {
				if f.packager != "" && f.packager != format {
					continue
				}
				src, mode := filepath.Join(c.Root, f.src), os.FileMode(0o644)
				switch {
				case f.src == "gz:docs/nodewatch.1":
					src = manGz
				case len(f.src) > 4 && f.src[:4] == "bin:":
					src, mode = filepath.Join(bins, p.String(), f.src[4:]), 0o755
				}
				contents = append(contents, &files.Content{
					Source: src, Destination: f.dst,
					FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: st.Time},
				})
			}
			info := nfpm.WithDefaults(&nfpm.Info{
				Name:        "nodewatch",
				Arch:        p.Arch,
				Platform:    "linux",
				Version:     st.Version,
				Section:     "admin",
				Priority:    "optional",
				Maintainer:  "The nodewatch Authors <nodewatch@users.noreply.github.com>",
				Description: "follow cluster state (etcd keys, Metropolis nodes) as newline-delimited JSON",
				Vendor:      "nodewatch",
				Homepage:    "https://github.com/nodewatch/nodewatch",
				License:     "Apache-2.0",
				MTime:       st.Time,
				Overridables: nfpm.Overridables{
					Contents: contents,
					RPM:      nfpm.RPM{Group: "Applications/System", BuildHost: "nodewatch"},
				},
			})
			if err := nfpm.PrepareForPackager(info, format); err != nil {
				return nil, err
			}
			var pkgr nfpm.Packager = deb.Default
			if format == "rpm" {
				pkgr = rpm.DefaultRPM
			}
			name := pkgr.ConventionalFileName(info)
			var out bytes.Buffer
			if err := pkgr.Package(info, &out); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(c.Dist, name), out.Bytes(), 0o644); err != nil {
				return nil, err
			}
			names = append(names, name)
		}
	}
	return names, nil
}
