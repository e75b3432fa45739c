//go:build tools

// Package tools pins the tools the tests build (go build in this
// directory): see go.mod.
package tools

import (
	_ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
	_ "github.com/fullstorydev/grpcurl/cmd/grpcurl"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
