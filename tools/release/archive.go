package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"
)

// entry is one file of an archive, a package or an image layer.
type entry struct {
	name string // slash-separated, relative to the archive's root
	mode int64  // permission bits; a directory when dir is set
	dir  bool
	uid  int
	data []byte
}

// docs are the files of the tree every archive carries beside the
// binaries: where they are in the tree, and where in the archive.
var docs = [][2]string{
	{"LICENSE", "LICENSE"},
	{"NOTICE", "NOTICE"},
	{"README.md", "README.md"},
	{"docs/nodewatch.1", "nodewatch.1"},
	{"completions/nodewatch.bash", "completions/nodewatch.bash"},
	{"completions/_nodewatch", "completions/_nodewatch"},
	{"completions/nodewatch.fish", "completions/nodewatch.fish"},
}

// archiveFiles is what the archive of p holds, under top/: the binaries,
// then docs, in that order.
func archiveFiles(root, bins string, p Platform, top string) ([]entry, error) {
	var es []entry
	for _, b := range Binaries {
		data, err := os.ReadFile(filepath.Join(bins, p.String(), p.exe(b)))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: path.Join(top, p.exe(b)), mode: 0o755, data: data})
	}
	for _, d := range docs {
		data, err := os.ReadFile(filepath.Join(root, d[0]))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: path.Join(top, d[1]), mode: 0o644, data: data})
	}
	return es, nil
}

// archives writes nodewatch_VERSION_OS_ARCH.tar.gz (.zip for Windows) for
// each platform, each with one directory of that name at its root.
func archives(c Config, st Stamp, bins string) ([]string, error) {
	var names []string
	for _, p := range Platforms {
		top := "nodewatch_" + st.Name() + "_" + p.String()
		es, err := archiveFiles(c.Root, bins, p, top)
		if err != nil {
			return nil, err
		}
		var data []byte
		name := top + ".tar.gz"
		if p.OS == "windows" {
			name = top + ".zip"
			data, err = zipOf(es, st.Time)
		} else {
			data, err = tarGz(withDirs(es), st.Time)
		}
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(c.Dist, name), data, 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// withDirs puts before the entries each directory they are in that is not
// listed yet, so that an archive extracts with its directories' modes.
func withDirs(es []entry) []entry {
	seen := map[string]bool{}
	var out []entry
	for _, e := range es {
		var parents []string
		for d := path.Dir(e.name); d != "." && d != "/" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			out = append(out, entry{name: d, mode: 0o755, dir: true, uid: e.uid})
		}
		if e.dir {
			seen[e.name] = true
		}
		out = append(out, e)
	}
	return out
}

// tarOf writes es as a tar stream: each entry owned by its uid (as its
// gid), with no user or group names, all at t.
func tarOf(w io.Writer, es []entry, t time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range es {
		// USTAR: PAX records would carry access and change times.
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: t, Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarGz is tarOf compressed with gzip, whose header carries no name and
// no time.
func tarGz(es []entry, t time.Time) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if err := tarOf(zw, es, t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// zipOf writes es as a zip archive, every entry at t.
func zipOf(es []entry, t time.Time) ([]byte, error) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: t}
		h.SetMode(os.FileMode(e.mode))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
