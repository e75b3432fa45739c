package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user serve runs as in the image: not root, and with no shell.
const (
	imageUID  = 65532
	imageUser = "65532:65532"
)

// Entrypoint is what the image runs: serve, with the arguments given to
// the container after it.
var Entrypoint = []string{"/usr/bin/nodewatch", "serve"}

// image writes nodewatch_VERSION_oci.tar: an OCI image layout, as a tar
// archive, holding one index of serve's image for each linux platform.
// Each image is one layer on an empty base (no base image is pulled):
// the static binary, the CA certificates, and /etc/passwd and /etc/group
// naming the user it runs as. `skopeo copy --all
// oci-archive:nodewatch_VERSION_oci.tar:VERSION docker://REGISTRY/nodewatch:VERSION`
// pushes it.
func image(c Config, st Stamp, bins string) ([]string, error) {
	cas, err := os.ReadFile(c.CACerts)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "nodewatch",
		"org.opencontainers.image.description": "nodewatch serve: the Curator Watch API over node records in etcd",
		"org.opencontainers.image.version":     st.Version,
		"org.opencontainers.image.revision":    st.Commit,
		"org.opencontainers.image.source":      "https://github.com/nodewatch/nodewatch",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     st.Time.Format("2006-01-02T15:04:05Z"),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		if p.OS != "linux" {
			continue
		}
		bin, err := os.ReadFile(filepath.Join(bins, p.String(), "nodewatch"))
		if err != nil {
			return nil, err
		}
		es := withDirs([]entry{
			{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: cas},
			{name: "home/nonroot", mode: 0o700, dir: true, uid: imageUID},
			{name: "tmp", mode: 0o1777, dir: true},
			{name: "usr/bin/nodewatch", mode: 0o755, data: bin},
		})
		var layerTar bytes.Buffer
		if err := tarOf(&layerTar, es, st.Time); err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: st.Time}, CreatedBy: "nodewatch release (tools/release)",
		}})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = p.OS, p.Arch
		cf.Created = v1.Time{Time: st.Time}
		cf.Config = v1.Config{
			User:         imageUser,
			Entrypoint:   Entrypoint,
			WorkingDir:   "/home/nonroot",
			Env:          []string{"PATH=/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			ExposedPorts: map[string]struct{}{"7835/tcp": {}, "9090/tcp": {}},
			Labels:       labels,
		}
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch},
		}})
	}
	dir := filepath.Join(c.Dist, "build", "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": st.Name(),
	})); err != nil {
		return nil, err
	}
	name := "nodewatch_" + st.Name() + "_oci.tar"
	f, err := os.Create(filepath.Join(c.Dist, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es, err := treeEntries(dir)
	if err != nil {
		return nil, err
	}
	if err := tarOf(f, es, st.Time); err != nil {
		return nil, err
	}
	return []string{name}, f.Close()
}

// treeEntries lists the files and directories under dir, sorted by
// name, as archive entries relative to dir.
func treeEntries(dir string) ([]entry, error) {
	var es []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			es = append(es, entry{name: filepath.ToSlash(rel), mode: 0o755, dir: true})
			return nil
		}
		data, err := os.ReadFile(p)
		es = append(es, entry{name: filepath.ToSlash(rel), mode: 0o644, data: data})
		return err
	})
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	return es, err
}
