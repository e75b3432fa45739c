#!/usr/bin/env bash
# alternate.sh PAIRS SHAPE BIN... : row 3 of bench/compare (live CPU per
# change with --filter, in transactions of 50) for each nodewatch binary in
# turn, PAIRS times, each run against etcdctl; prints one line a run:
# the binary, nodewatch's and etcdctl's µs per change, and their ratio.
# The way to tell two builds apart on a shared machine: what swings from
# run to run swings for both, and each run's ratio is against etcdctl in
# that run. CHANGES (default 300000) sets the changes per run.
#
#	make build etcd-bin
#	go build -o /tmp/before ./cmd/nodewatch   # at the commit before
#	scripts/alternate.sh 4 200 /tmp/before bin/nodewatch
set -euo pipefail

cd "$(dirname "$0")/.."
pairs=$1 shape=$2
shift 2
cmp=$(mktemp -d)/compare
trap 'rm -rf "$(dirname "$cmp")"' EXIT
go build -o "$cmp" ./bench/compare
for _ in $(seq "$pairs"); do
	for bin in "$@"; do
		"$cmp" -nodewatch "$bin" -rows 3 -shapes "$shape" -modes txns -pairs 1 -txn-changes "${CHANGES:-300000}" 2>&1 |
			sed -n 's/^row 3, .*run 1: \([0-9.]*\) µs, \([0-9.]*\) µs per change (ratio \([0-9.]*\)).*/\1 \2 \3/p' |
			sed "s|^|$bin |"
	done
done
