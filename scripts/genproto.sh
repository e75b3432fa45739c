#!/usr/bin/env bash
# Regenerates the checked-in Go code for the Monogon Metropolis Curator wire
# types (third_party/proto/ -> internal/curator/{apipb,commonpb,versionpb,mgmtpb}).
#
# Works from a fresh machine: installs protoc from Debian if it is missing and
# installs pinned protoc-gen-go / protoc-gen-go-grpc into ./.bin. Idempotent:
# running it twice produces no diff.
set -euo pipefail

# Generator versions. protoc-gen-go must match google.golang.org/protobuf in
# go.mod; protoc-gen-go-grpc must generate code the grpc version in go.mod
# supports (it needs grpc >= 1.64 for the generic streaming helpers).
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BIN="$ROOT/.bin"
MODULE=github.com/nodewatch/nodewatch

# 1. protoc (plus the well-known types such as google/protobuf/timestamp.proto).
if ! command -v protoc >/dev/null 2>&1; then
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		SUDO=sudo
	fi
	$SUDO apt-get update
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler
fi

# 2. Pinned code generators, built with the Go toolchain into ./.bin.
# Reinstall only when the binary is missing or was built from another version.
install_gen() {
	local name="$1" pkg="$2" version="$3"
	if [ -x "$BIN/$name" ] &&
		go version -m "$BIN/$name" 2>/dev/null | awk '$1 == "mod" {print $3}' | grep -qx "$version"; then
		return 0
	fi
	GOBIN="$BIN" go install "$pkg@$version"
}
mkdir -p "$BIN"
install_gen protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_gen protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

# 3. Generate. Old generated files are removed first so that a removed .proto
# leaves nothing stale behind; hand-written files (tests) are kept.
OUT_DIRS=(internal/curator/apipb internal/curator/commonpb internal/curator/versionpb internal/curator/mgmtpb)
for d in "${OUT_DIRS[@]}"; do
	mkdir -p "$d"
	find "$d" -maxdepth 1 -name '*.pb.go' -delete
done

PROTOS=(
	third_party/proto/version/spec/spec.proto
	third_party/proto/metropolis/proto/common/common.proto
	third_party/proto/metropolis/node/core/curator/proto/api/api.proto
	third_party/proto/metropolis/proto/api/management.proto
)

PATH="$BIN:$PATH" protoc \
	--proto_path=third_party/proto \
	--go_out=. --go_opt=module="$MODULE" \
	--go-grpc_out=. --go-grpc_opt=module="$MODULE" \
	"${PROTOS[@]#third_party/proto/}"

echo "genproto: generated with $(protoc --version), protoc-gen-go $PROTOC_GEN_GO_VERSION, protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION"
