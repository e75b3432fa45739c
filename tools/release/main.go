// Command release builds every artifact of a nodewatch release into one
// directory (make release: dist/), from the tree it is run in, and checks
// such a directory (make release-check):
//
//   - static, trimmed binaries of nodewatch and nodewatch-etcd for linux,
//     darwin and windows on amd64 and arm64, stamped by scripts/version.sh;
//   - one archive per platform (.tar.gz; .zip for Windows) with both
//     binaries, LICENSE, NOTICE, README.md, the man page and the completions;
//   - a CycloneDX SBOM per binary, from the module graph (cyclonedx-gomod);
//   - .deb and .rpm packages for linux/amd64 and linux/arm64 (nfpm);
//   - an OCI image layout archive of serve for linux/amd64 and linux/arm64,
//     built without a Docker daemon (go-containerregistry);
//   - SHA256SUMS over all of them.
//
// Everything is reproducible: each time in an archive, package and image
// is the commit's (SOURCE_DATE_EPOCH when set), entries are in a fixed
// order with fixed owners, and nothing random (serial numbers, build
// hosts) is written, so that two runs from one commit give byte-identical
// SHA256SUMS.
//
// Why not goreleaser: it writes container images only through a Docker
// daemon or to a registry, neither of which a release machine here has,
// and building it from the module proxy takes about 6 minutes on 2 cores
// where this tool and its libraries take under one.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	root := flag.String("root", "..", "the nodewatch tree to release")
	dist := flag.String("dist", "", "where the artifacts go (default ROOT/dist); emptied first")
	cdx := flag.String("cyclonedx", "cyclonedx-gomod", "the cyclonedx-gomod `command`")
	caCerts := flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates the image carries")
	check := flag.Bool("check", false, "check the artifacts in -dist instead of building them")
	flag.Parse()
	if *dist == "" {
		*dist = *root + "/dist"
	}
	var err error
	if *check {
		err = Check(*dist)
	} else {
		err = Build(Config{Root: *root, Dist: *dist, CycloneDX: *cdx, CACerts: *caCerts})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}
