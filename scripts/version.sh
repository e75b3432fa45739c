#!/usr/bin/env bash
# What a build of nodewatch is stamped with, for make build and make release:
#
#   version  the tag v* at HEAD; else v$(cat VERSION)-dev+g<commit12>, the
#            next release's version with the commit as build metadata (and
#            .dirty when the tree has changes); without git, v$(cat VERSION)
#   commit   the full commit hash (empty without git)
#   epoch    the commit's time in seconds since 1970 (SOURCE_DATE_EPOCH when
#            set, as reproducible-builds.org defines it; 0 without either)
#   date     epoch as RFC 3339 in UTC (empty when epoch is 0)
#
# Usage: scripts/version.sh          prints them as NAME=VALUE lines
#        scripts/version.sh -ldflags prints the go build -ldflags -X flags
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(tr -d ' \n' < VERSION)
version=v$base commit="" epoch=0
if commit=$(git rev-parse HEAD 2>/dev/null); then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
		version=$tag
	else
		version=v$base-dev+g${commit:0:12}
		[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || version=$version.dirty
	fi
	epoch=$(git log -1 --format=%ct HEAD)
else
	commit=""
fi
epoch=${SOURCE_DATE_EPOCH:-$epoch}
date=""
if [ "$epoch" != 0 ]; then # GNU date, then BSD date (macOS)
	date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$epoch" +%Y-%m-%dT%H:%M:%SZ)
fi
if [ "${1:-}" = -ldflags ]; then
	pkg=github.com/nodewatch/nodewatch/internal/version
	echo "-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"
else
	printf 'version=%s\ncommit=%s\nepoch=%s\ndate=%s\n' "$version" "$commit" "$epoch" "$date"
fi
