#!/usr/bin/env bash
# instructions.sh [REV]: instructions per operation of the per-change Go
# benchmarks, counted by valgrind's cachegrind instead of timed. On a shared
# machine a microbenchmark's time swings by a fifth from run to run; the
# count is the same to within a few instructions, so that a change of 3% in
# the work done shows. Each count is the difference between two runs of
# different lengths (-benchtime Nx), so that start-up and set-up cancel.
#
# With REV, the same benchmarks at REV (in a temporary worktree, with this
# tree's benchmark files, so that both run the same benchmarks) beside it.
# Instructions are not time: a change that saves instructions but misses
# the cache more can still be slower (BENCHMARKS.md says which was timed).
set -euo pipefail

cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
	apt-get update && apt-get install -y valgrind
fi

benches=(
	"internal/etcdkv ObjectFrom/200B"
	"internal/etcdkv ObjectFrom/600B"
	"internal/etcdkv DiffKeyValue/200B"
	"internal/etcdkv DiffKeyValue/600B$"
	"internal/etcdkv DiffKeyValue/600B-two"
	"internal/view FollowerTxn50$"
	"internal/watch ChangeTxn50Filter$"
)
benchFiles=(internal/etcdkv/diff_bench_test.go internal/view/follower_test.go internal/watch/bench_test.go)

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/rev" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# count BIN DIR BENCH N: the instructions of N operations and the set-up.
# FollowerTxn50 allocates every change it applies, and the collections that
# fall within one run and not the other moved its count by a tenth: it is
# counted without the collector (GOGC=off), its allocations shown by
# -benchmem instead. The others free what they make (as the view does),
# and count the same with it, but for a rare run far off (once, 101,445
# for ObjectFrom/600B's 10,877): count again when a figure jumps.
count() {
	local gogc=
	[ "$3" = 'FollowerTxn50$' ] && gogc=off
	(cd "$2" && GOGC=$gogc valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$1" -test.run '^$' -test.bench "$3" -test.benchtime "${4}x" -test.cpu 1 2>&1 >/dev/null) |
		awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}

# perOp TREE PKG BENCH: instructions per operation in TREE.
perOp() {
	local bin="$tmp/$(echo "$1$2" | tr / _).test"
	[ -x "$bin" ] || (cd "$1" && go test -c -o "$bin" "./$2")
	local n1=2000 n2=22000
	[ "$3" = 'ChangeTxn50Filter$' ] && n1=20000 n2=120000
	[ "$3" = 'FollowerTxn50$' ] && n1=1000 n2=6000 # a batch of 50 an operation
	local a b
	a=$(count "$bin" "$1/$2" "$3" $n1)
	b=$(count "$bin" "$1/$2" "$3" $n2)
	echo $(((b - a) / (n2 - n1)))
}

rev=${1:-}
if [ -n "$rev" ]; then
	git worktree add -q --detach "$tmp/rev" "$rev"
	for f in "${benchFiles[@]}"; do cp "$f" "$tmp/rev/$f"; done
	printf '%-32s %12s %12s %8s\n' benchmark "$rev" HEAD change
else
	printf '%-32s %12s\n' benchmark HEAD
fi
for b in "${benches[@]}"; do
	read -r pkg name <<<"$b"
	now=$(perOp . "$pkg" "$name")
	if [ -n "$rev" ]; then
		was=$(perOp "$tmp/rev" "$pkg" "$name")
		printf '%-32s %12d %12d %+7.1f%%\n' "$name" "$was" "$now" "$(awk -v a="$was" -v b="$now" 'BEGIN { print (b - a) * 100 / a }')"
	else
		printf '%-32s %12d\n' "$name" "$now"
	fi
done
