#!/usr/bin/env bash
# make test-under-load: clone the committed HEAD twice into a temporary
# directory, then run `make test` RUNS times in a row (default 5) in the
# first clone while the second runs `go test -race ./...` in a loop beside
# it: a CPU-heavy neighbour, as on a shared CI machine. Stops at the first
# failing run and prints its log.
set -euo pipefail
runs=${RUNS:-5}
dir=$(mktemp -d)
hog=
cleanup() {
	[[ -n $hog ]] && kill -- "-$hog" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
git clone -q . "$dir/test"
git clone -q . "$dir/load"
setsid bash -c 'cd "$1" && while :; do go test -race -count=1 ./... >/dev/null 2>&1; done' _ "$dir/load" &
hog=$!
echo "load: go test -race ./... in a loop (pid group $hog)"
for i in $(seq "$runs"); do
	start=$(date +%s)
	if ! (cd "$dir/test" && make test >"$dir/run$i.log" 2>&1); then
		keep=${TMPDIR:-/tmp}/nodewatch-test-under-load-run$i.log
		cp "$dir/run$i.log" "$keep"
		echo "run $i of $runs FAILED after $(($(date +%s) - start))s (whole log: $keep):"
		grep -E -B2 -A12 -- '--- FAIL|^panic' "$dir/run$i.log" | head -80
		exit 1
	fi
	echo "run $i of $runs passed in $(($(date +%s) - start))s"
done
