#!/usr/bin/env bash
# recipes-snapshot.sh OUTDIR: record what this tree's nodewatch prints, so that a
# restructure can be shown to change nothing (diff -r OUTDIR-before OUTDIR-after).
#
# It builds nodewatch from the tree it is in, starts real etcd (the Makefile's etcd-bin
# target, or ETCD_BIN_DIR holding etcd and etcdctl) on free loopback ports with temporary
# data, loads deterministic node records (sim --nodes 5 --rate 0 --steps 40 --seed 1) and
# an mgmt-shaped World, and serves them with `nodewatch serve`. Then it records, each
# into OUTDIR/<group>/<name>.{stdout,stderr,exit}:
#
#   readme/   every shell block of README.md that runs nodewatch against a cluster, taken
#             from README.md and adapted so that it ends by itself and prints the same
#             thing every time (see the comment at each recipe); README.md's shell blocks
#             themselves, verbatim, in readme/blocks.txt
#   help/     --help of the program and of every command, version (minus its commit
#             line), completion bash|zsh|fish, man
#   output/   key, node and nodes with --once in each -o format, and the flags that
#             shape output (filter, equals, until, count, timeout, value modes, mgmt…)
#   usage/    usage errors and other failures: stderr and exit code
#   golden/   the golden files the tests compare with (testdata of packages whose tests
#             take -update, fuzz corpora left out), as they are
#   golden-tests/  the result of each test that compares with them
#
# Not run: README's make demo / make test and go install blocks (no cluster), and
# `serve --dev &` (its simulation is seeded from the clock): the fixture's serve stands in.
# Changes a recipe waits for are made only once it provably has its initial state (its etcd
# watch exists, or it has received serve's backlog), one batch at a time.
#
# Nothing in it depends on package paths: only on ./cmd/nodewatch, the Makefile's
# etcd-bin target, README.md, and the tests' -update flag.
#
# What varies between runs of one binary is normalized: wall-clock times of -o text and
# --timestamps, lease ids, the temporary directory (TMP), the fixture's ports (PORT),
# measured durations in stderr (DUR; runs of identical lines that held one are collapsed).
# Two runs on the same tree give identical OUTDIRs.
#
# Needs: go, jq, curl, openssl, ss (iproute2), timeout, setsid; bash 4.
set -uo pipefail

if [[ $# -ne 1 || $1 == -* ]]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
for tool in go jq curl openssl ss timeout setsid; do
	command -v "$tool" >/dev/null || { echo "recipes-snapshot: $tool is needed" >&2; exit 2; }
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
if [[ -n $(ls -A "$OUT") ]]; then
	echo "recipes-snapshot: $OUT is not empty" >&2
	exit 2
fi
tmp=$(mktemp -d /tmp/recipes-snapshot.XXXXXX)
raw=$tmp/raw # outputs before normalization
mkdir -p "$raw" "$tmp/bin" "$tmp/home" "$tmp/cwd"

PIDS=()      # background processes of this script, killed at the end
PORTS=()     # ports handed out, replaced by PORT in the outputs
PROBLEMS=()  # failures of this script (not of nodewatch): make it exit 1

log() { printf 'recipes-snapshot: [%3ss] %s\n' "$SECONDS" "$*" >&2; }
problem() { PROBLEMS+=("$*"); log "PROBLEM: $*"; }
die() { log "$*"; exit 1; }

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- binaries

log "building nodewatch from $root"
# -buildvcs=false: the version line would otherwise carry the commit.
(cd "$root" && go build -buildvcs=false -o "$tmp/bin/nodewatch" ./cmd/nodewatch) || die "go build failed"
if [[ -n ${ETCD_BIN_DIR:-} ]]; then
	etcdbin=$ETCD_BIN_DIR
else
	log "make etcd-bin"
	make -C "$root" --no-print-directory etcd-bin >&2 || die "make etcd-bin failed"
	etcdbin=$root/.bin
fi
[[ -x $etcdbin/etcd && -x $etcdbin/etcdctl ]] || die "no etcd and etcdctl in $etcdbin"
NW=$tmp/bin/nodewatch

# The environment of everything recorded: nothing of the caller's (no NODEWATCH_*, no
# metroctl credentials in a real home).
PATHS=$tmp/bin:/usr/local/bin:/usr/bin:/bin
BASEENV=(env -i "PATH=$PATHS" "HOME=$tmp/home" "LANG=C.UTF-8" "TERM=dumb" "TZ=UTC")

# free_port VAR: a loopback port below the ephemeral range (where connections of the
# machine take theirs), not in use, not handed out before, into VAR.
EPHEMERAL_LOW=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
	local p
	while :; do
		p=$((10000 + RANDOM % (EPHEMERAL_LOW - 10000)))
		[[ " ${PORTS[*]} " == *" $p "* ]] && continue
		ss -Htan | awk '{print $4}' | grep -q ":$p\$" && continue
		PORTS+=("$p")
		printf -v "$1" '%s' "$p"
		return
	done
}

# ---------------------------------------------------------------- etcd, sim, serve

# ectl ARGS: etcdctl against the current fixture's etcd (ETCDCTL_FLAGS: its TLS flags).
ECTL_FLAGS=()
ectl() { "$etcdbin/etcdctl" --endpoints "$ETCD" --command-timeout 10s "${ECTL_FLAGS[@]}" "$@"; }

# etxn KEY VALUE [KEY VALUE…]: put them in one transaction (one revision, one batch).
# A VALUE of -DELETE- deletes KEY instead.
etxn() {
	local ops="" k v
	while [[ $# -ge 2 ]]; do
		k=$(jq -rn --arg s "$1" '$s|@json')
		if [[ $2 == -DELETE- ]]; then
			ops+="del $k"$'\n'
		else
			v=$(jq -rn --arg s "$2" '$s|@json')
			ops+="put $k $v"$'\n'
		fi
		shift 2
	done
	printf '\n%s\n\n' "$ops" | ectl txn >/dev/null || problem "etcd txn failed"
}

# start_etcd NAME [TLSDIR]: etcd on free loopback ports; sets ETCD, ETCD_PORT. A port
# taken meanwhile by something else: again, on others.
start_etcd() {
	local try
	for try in 1 2 3 4 5; do
		try_etcd "$@" && return
		log "etcd $1 did not start (attempt $try):"
		cat "$tmp/etcd-$1.log" >&2
	done
	die "etcd $1 did not start"
}
try_etcd() {
	local name=$1 tls=${2:-} cport pport scheme=http flags=()
	free_port cport
	free_port pport
	if [[ -n $tls ]]; then
		scheme=https
		flags=(--cert-file "$tls/etcd.pem" --key-file "$tls/etcd-key.pem" --trusted-ca-file "$tls/etcd-ca.pem" --client-cert-auth)
	fi
	rm -rf "$tmp/etcd-$name"
	setsid "$etcdbin/etcd" --name "$name" --data-dir "$tmp/etcd-$name" \
		--listen-client-urls "$scheme://127.0.0.1:$cport" --advertise-client-urls "$scheme://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "$name=http://127.0.0.1:$pport" --log-level error "${flags[@]}" \
		>"$tmp/etcd-$name.log" 2>&1 &
	ETCD_PID=$!
	PIDS+=("$ETCD_PID")
	ETCD=$scheme://127.0.0.1:$cport
	ETCD_PORT=$cport
	wait_up "$ETCD_PID" etcd_healthy
}
etcd_healthy() { ectl endpoint health >/dev/null 2>&1; }

# wait_up PID CHECK…: true once CHECK succeeds, within 10 s and while PID runs;
# else PID is killed and false.
wait_up() {
	local pid=$1
	shift
	for _ in $(seq 100); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 1
}

# start_serve NAME ARGS…: nodewatch serve on a free loopback port (--listen given here);
# sets SERVE (HOST:PORT), SERVE_PID; its stderr goes to $tmp/serve-NAME.stderr.
start_serve() {
	local try
	for try in 1 2 3 4 5; do
		try_serve "$@" && return
		log "serve $1 did not start (attempt $try):"
		cat "$tmp/serve-$1.stderr" >&2
	done
	die "serve $1 did not start"
}
try_serve() {
	local name=$1 port
	shift
	free_port port
	: >"$tmp/serve-$name.stderr"
	(cd "$tmp/cwd" && exec setsid "${BASEENV[@]}" "$NW" serve --listen "127.0.0.1:$port" "$@" \
		>"$tmp/serve-$name.stdout" 2>"$tmp/serve-$name.stderr" </dev/null) &
	SERVE_PID=$!
	PIDS+=("$SERVE_PID")
	SERVE=127.0.0.1:$port
	wait_up "$SERVE_PID" grep -q 'serving Curator Watch' "$tmp/serve-$name.stderr"
}

# stop NAME PID GROUP: SIGTERM, wait, and record the exit code and the process's
# stdout/stderr files from $tmp under GROUP/NAME (GROUP empty: not recorded).
stop_proc() {
	local name=$1 pid=$2 group=${3:-} rc
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [[ -n $group ]]; then
		mkdir -p "$raw/$group"
		cp "$tmp/$name.stdout" "$raw/$group/$name.stdout"
		cp "$tmp/$name.stderr" "$raw/$group/$name.stderr"
		echo "$rc" >"$raw/$group/$name.exit"
	fi
}

# The mgmt World: exported resources (values: mgmt's gob, base64, as encoding/gob wrote
# them for mgmt's types), strings, a deploy, the scheduler's keys (the host's one leased).
declare -A GOB=(
	['/_mgmt/exported/*/h1/file//tmp/foo']='/6kQABIqcmVzb3VyY2VzLkZpbGVSZXN/AwEBB0ZpbGVSZXMB/4AAAQwBBEJhc2UB/4IAAQRQYXRoAQwAAQdEaXJuYW1lAQwAAQhCYXNlbmFtZQEMAAEHQ29udGVudAEMAAEGU291cmNlAQwAAQVTdGF0ZQEMAAEHUmVjdXJzZQECAAEFRm9yY2UBAgABBU93bmVyAQwAAQVHcm91cAEMAAEETW9kZQEMAAAAM/+BAwEBBEJhc2UB/4IAAQMBBktpbmRlZAH/hAABBU5hbWVkAf+GAAEETWV0YQH/iAAAAB7/gwMBAQZLaW5kZWQB/4QAAQEBBVhraW5kAQwAAAAd/4UDAQEFTmFtZWQB/4YAAQEBBVhuYW1lAQwAAAAd/4cDAQEETWV0YQH/iAABAQEFWG1ldGEB/4oAAAD/m/+JAwEBCk1ldGFQYXJhbXMB/4oAAQwBCEF1dG9FZGdlAQIAAQlBdXRvR3JvdXABAgABBE5vb3ABAgABBVJldHJ5AQQAAQVEZWxheQEGAAEEUG9sbAEGAAEFTGltaXQBCAABBUJ1cnN0AQQAAQRTZW1hAf+MAAEHUmV3YXRjaAECAAEHUmVhbGl6ZQECAAEGRXhwb3J0Af+MAAAAFv+LAgEBCFtdc3RyaW5nAf+MAAEMAAA8/4A5AQEBBGZpbGUAAQEIL3RtcC9mb28AAQEBAQEBBf7wfwUBASoAAAABCC90bXAvZm9vAwZoZWxsbwoA'
	['/_mgmt/exported/h3/h2/svc/nginx']='XRAAESpyZXNvdXJjZXMuU3ZjUmVz/40DAQEGU3ZjUmVzAf+OAAEFAQRCYXNlAf+CAAEFU3RhdGUBDAABB1N0YXJ0dXABDAABB1Nlc3Npb24BAgABBFR5cGUBDAAAADP/gQMBAQRCYXNlAf+CAAEDAQZLaW5kZWQB/4QAAQVOYW1lZAH/hgABBE1ldGEB/4gAAAAe/4MDAQEGS2luZGVkAf+EAAEBAQVYa2luZAEMAAAAHf+FAwEBBU5hbWVkAf+GAAEBAQVYbmFtZQEMAAAAHf+HAwEBBE1ldGEB/4gAAQEBBVhtZXRhAf+KAAAA/5v/iQMBAQpNZXRhUGFyYW1zAf+KAAEMAQhBdXRvRWRnZQECAAEJQXV0b0dyb3VwAQIAAQROb29wAQIAAQVSZXRyeQEEAAEFRGVsYXkBBgABBFBvbGwBBgABBUxpbWl0AQgAAQVCdXJzdAEEAAEEU2VtYQH/jAABB1Jld2F0Y2gBAgABB1JlYWxpemUBAgABBkV4cG9ydAH/jAAAABb/iwIBAQhbXXN0cmluZwH/jAABDAAAMP+OLQEBAQNzdmMAAQEFbmdpbngAAQEBAQEBBf7wfwUBAmgzAAAAAQdydW5uaW5nAA=='
	['/_mgmt/exported/h2/h1/file//etc/motd']='/6kQABIqcmVzb3VyY2VzLkZpbGVSZXN/AwEBB0ZpbGVSZXMB/4AAAQwBBEJhc2UB/4IAAQRQYXRoAQwAAQdEaXJuYW1lAQwAAQhCYXNlbmFtZQEMAAEHQ29udGVudAEMAAEGU291cmNlAQwAAQVTdGF0ZQEMAAEHUmVjdXJzZQECAAEFRm9yY2UBAgABBU93bmVyAQwAAQVHcm91cAEMAAEETW9kZQEMAAAAM/+BAwEBBEJhc2UB/4IAAQMBBktpbmRlZAH/hAABBU5hbWVkAf+GAAEETWV0YQH/iAAAAB7/gwMBAQZLaW5kZWQB/4QAAQEBBVhraW5kAQwAAAAd/4UDAQEFTmFtZWQB/4YAAQEBBVhuYW1lAQwAAAAd/4cDAQEETWV0YQH/iAABAQEFWG1ldGEB/4oAAAD/m/+JAwEBCk1ldGFQYXJhbXMB/4oAAQwBCEF1dG9FZGdlAQIAAQlBdXRvR3JvdXABAgABBE5vb3ABAgABBVJldHJ5AQQAAQVEZWxheQEGAAEEUG9sbAEGAAEFTGltaXQBCAABBUJ1cnN0AQQAAQRTZW1hAf+MAAEHUmV3YXRjaAECAAEHUmVhbGl6ZQECAAEGRXhwb3J0Af+MAAAAFv+LAgEBCFtdc3RyaW5nAf+MAAEMAAA3/4A0AQEBBGZpbGUAAQEJL2V0Yy9tb3RkAAEBAQEBAQX+8H8FAQJoMgAAAAEJL2V0Yy9tb3RkAA=='
	['/_mgmt/exported/h3/h1/file//srv/x']='/6kQABIqcmVzb3VyY2VzLkZpbGVSZXN/AwEBB0ZpbGVSZXMB/4AAAQwBBEJhc2UB/4IAAQRQYXRoAQwAAQdEaXJuYW1lAQwAAQhCYXNlbmFtZQEMAAEHQ29udGVudAEMAAEGU291cmNlAQwAAQVTdGF0ZQEMAAEHUmVjdXJzZQECAAEFRm9yY2UBAgABBU93bmVyAQwAAQVHcm91cAEMAAEETW9kZQEMAAAAM/+BAwEBBEJhc2UB/4IAAQMBBktpbmRlZAH/hAABBU5hbWVkAf+GAAEETWV0YQH/iAAAAB7/gwMBAQZLaW5kZWQB/4QAAQEBBVhraW5kAQwAAAAd/4UDAQEFTmFtZWQB/4YAAQEBBVhuYW1lAQwAAAAd/4cDAQEETWV0YQH/iAABAQEFWG1ldGEB/4oAAAD/m/+JAwEBCk1ldGFQYXJhbXMB/4oAAQwBCEF1dG9FZGdlAQIAAQlBdXRvR3JvdXABAgABBE5vb3ABAgABBVJldHJ5AQQAAQVEZWxheQEGAAEEUG9sbAEGAAEFTGltaXQBCAABBUJ1cnN0AQQAAQRTZW1hAf+MAAEHUmV3YXRjaAECAAEHUmVhbGl6ZQECAAEGRXhwb3J0Af+MAAAAFv+LAgEBCFtdc3RyaW5nAf+MAAEMAAAx/4AuAQEBBGZpbGUAAQEGL3Nydi94AAEBAQEBAQX+8H8FAQJoMwAAAAEGL3Nydi94AA=='
	['/_mgmt/exported/h3/h4/file//opt/z']='/6kQABIqcmVzb3VyY2VzLkZpbGVSZXN/AwEBB0ZpbGVSZXMB/4AAAQwBBEJhc2UB/4IAAQRQYXRoAQwAAQdEaXJuYW1lAQwAAQhCYXNlbmFtZQEMAAEHQ29udGVudAEMAAEGU291cmNlAQwAAQVTdGF0ZQEMAAEHUmVjdXJzZQECAAEFRm9yY2UBAgABBU93bmVyAQwAAQVHcm91cAEMAAEETW9kZQEMAAAAM/+BAwEBBEJhc2UB/4IAAQMBBktpbmRlZAH/hAABBU5hbWVkAf+GAAEETWV0YQH/iAAAAB7/gwMBAQZLaW5kZWQB/4QAAQEBBVhraW5kAQwAAAAd/4UDAQEFTmFtZWQB/4YAAQEBBVhuYW1lAQwAAAAd/4cDAQEETWV0YQH/iAABAQEFWG1ldGEB/4oAAAD/m/+JAwEBCk1ldGFQYXJhbXMB/4oAAQwBCEF1dG9FZGdlAQIAAQlBdXRvR3JvdXABAgABBE5vb3ABAgABBVJldHJ5AQQAAQVEZWxheQEGAAEEUG9sbAEGAAEFTGltaXQBCAABBUJ1cnN0AQQAAQRTZW1hAf+MAAEHUmV3YXRjaAECAAEHUmVhbGl6ZQECAAEGRXhwb3J0Af+MAAAAFv+LAgEBCFtdc3RyaW5nAf+MAAEMAAAx/4AuAQEBBGZpbGUAAQEGL29wdC96AAEBAQEBAQX+8H8FAQJoMwAAAAEGL29wdC96AA=='
	['/_mgmt/exported/*/h3/svc/nginx']='XRAAESpyZXNvdXJjZXMuU3ZjUmVz/40DAQEGU3ZjUmVzAf+OAAEFAQRCYXNlAf+CAAEFU3RhdGUBDAABB1N0YXJ0dXABDAABB1Nlc3Npb24BAgABBFR5cGUBDAAAADP/gQMBAQRCYXNlAf+CAAEDAQZLaW5kZWQB/4QAAQVOYW1lZAH/hgABBE1ldGEB/4gAAAAe/4MDAQEGS2luZGVkAf+EAAEBAQVYa2luZAEMAAAAHf+FAwEBBU5hbWVkAf+GAAEBAQVYbmFtZQEMAAAAHf+HAwEBBE1ldGEB/4gAAQEBBVhtZXRhAf+KAAAA/5v/iQMBAQpNZXRhUGFyYW1zAf+KAAEMAQhBdXRvRWRnZQECAAEJQXV0b0dyb3VwAQIAAQROb29wAQIAAQVSZXRyeQEEAAEFRGVsYXkBBgABBFBvbGwBBgABBUxpbWl0AQgAAQVCdXJzdAEEAAEEU2VtYQH/jAABB1Jld2F0Y2gBAgABB1JlYWxpemUBAgABBkV4cG9ydAH/jAAAABb/iwIBAQhbXXN0cmluZwH/jAABDAAAL/+OLAEBAQNzdmMAAQEFbmdpbngAAQEBAQEBBf7wfwUBASoAAAABB3J1bm5pbmcA'
)

mgmt_world() {
	etxn '/_mgmt/exported/*/h1/file//tmp/foo' "${GOB['/_mgmt/exported/*/h1/file//tmp/foo']}" \
		'/_mgmt/exported/h3/h2/svc/nginx' "${GOB['/_mgmt/exported/h3/h2/svc/nginx']}" \
		'/_mgmt/exported/h2/h1/file//etc/motd' "${GOB['/_mgmt/exported/h2/h1/file//etc/motd']}" \
		'/_mgmt/exported/h3/h1/file//srv/x' "${GOB['/_mgmt/exported/h3/h1/file//srv/x']}" \
		/_mgmt/strings/greeting hi /_mgmt/strings/color/h1 red /_mgmt/strings/color/h2 blue \
		/_mgmt/deploy/1/hash 4f2a9c /_mgmt/scheduler/schedule/web h1,h2 \
		/config/app '{"v":"initial"}'
	local lease
	lease=$(ectl lease grant 3600 | awk '{print $2}')
	ectl put --lease="$lease" /_mgmt/scheduler/hostname/h1/web 'maxCount=2&persist=false&sessionTTL=10&strategy=rr' >/dev/null
}

# fixture_up: a fresh etcd, sim's records, the mgmt World, serve over it. Every fixture is
# the same (same revisions too), so that a recipe that changes it has it to itself.
# Sets ETCD, SERVE, CURATOR (=SERVE), FIXTURE_SERVE_PID, FIXTURE_ETCD_PID.
FIXTURES=0
fixture_up() {
	FIXTURES=$((FIXTURES + 1))
	ECTL_FLAGS=()
	start_etcd "f$FIXTURES"
	FIXTURE_ETCD_PID=$ETCD_PID
	"${BASEENV[@]}" "$NW" sim --etcd "$ETCD" --nodes 5 --rate 0 --steps 40 --seed 1 \
		>"$tmp/sim.stdout" 2>"$tmp/sim.stderr" </dev/null
	echo $? >"$tmp/sim.exit"
	[[ $(cat "$tmp/sim.exit") == 0 ]] || { cat "$tmp/sim.stderr" >&2; die "sim failed"; }
	mgmt_world
	start_serve fixture --etcd "$ETCD"
	FIXTURE_SERVE_PID=$SERVE_PID
	CURATOR=$SERVE
}

fixture_down() {
	local group=${1:-}
	stop_proc serve-fixture "$FIXTURE_SERVE_PID" "$group"
	stop_proc etcd "$FIXTURE_ETCD_PID"
}

# in_fixture NAME SCRIPT [ACT]: recipe NAME in a fixture of its own.
in_fixture() {
	fixture_up
	recipe "$@"
	fixture_down
}

# node_ids FILTER: ids of the fixture's node records for which the jq FILTER is true.
node_ids() { ectl get --prefix /nodes/ --print-value-only | jq -r "select($1) | .id"; }
node_value() { ectl get "/nodes/$1" --print-value-only; }

# ---------------------------------------------------------------- recording

# norm_* run over the raw outputs once all are recorded (see normalize below).

# rec GROUP NAME [ENV=V…] -- ARGS…: run nodewatch ARGS (stdin /dev/null, cwd $tmp/cwd,
# at most 60s) and record stdout, stderr and exit code.
rec() {
	local group=$1 name=$2 envs=()
	shift 2
	while [[ $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	mkdir -p "$raw/$group"
	(cd "$tmp/cwd" && timeout -k 5 60 setsid -w "${BASEENV[@]}" "${envs[@]}" "$NW" "$@" \
		>"$raw/$group/$name.stdout" 2>"$raw/$group/$name.stderr" </dev/null)
	local rc=$?
	echo "$rc" >"$raw/$group/$name.exit"
	[[ $rc == 124 && ! " $* " =~ " --timeout " ]] && problem "$group/$name: timed out (60s guard)"
}

# README blocks -------------------------------------------------------------

# readme_blocks: every ```sh block of README.md, then of docs/security.md (where the
# TLS recipes live), as "heading<TAB>index<TAB>line" lines.
readme_lines() {
	awk '
		/^```sh$/ && !inblock { inblock = 1; n[h]++; next }
		/^```/ && inblock { inblock = 0; next }
		inblock { print h "\t" n[h] "\t" $0; next }
		/^#+ / { h = $0 }
	' "$root/README.md" "$root/docs/security.md"
}

# readme_block HEADING N: the Nth ```sh block under HEADING (e.g. "## Recipes").
readme_block() {
	local out
	out=$(readme_lines | awk -F'\t' -v h="$1" -v n="$2" '$1 == h && $2 == n { sub(/^[^\t]*\t[^\t]*\t/, ""); print }')
	[[ -n $out ]] || problem "README.md has no block $2 under \"$1\""
	printf '%s\n' "$out"
}

# readme_cmd HEADING N TEXT: the one command of that block (continuation lines joined
# as they are) that contains TEXT.
readme_cmd() {
	local out
	out=$(readme_block "$1" "$2" | awk -v t="$3" '
		{ cmd = (cont ? cmd "\n" : "") $0; cont = /\\$/ }
		!cont { if (index(cmd, t)) { print cmd; found++ } cmd = "" }
		END { exit found != 1 }
	') || problem "README.md block $2 under \"$1\" has not exactly one command with \"$3\""
	printf '%s\n' "$out"
}

# adapt TEXT SEDEXPR…: TEXT with each sed -E expression applied; one that changes nothing
# means README.md no longer says what the adaptation expects (a problem).
adapt() {
	local text=$1 e new
	shift
	for e in "$@"; do
		new=$(printf '%s\n' "$text" | sed -E "$e")
		[[ $new != "$text" ]] || problem "adaptation '$e' does not apply to: $text"
		text=$new
	done
	printf '%s\n' "$text"
}

# Recipes --------------------------------------------------------------------

# recipe NAME SNIPPET [ACT]: run SNIPPET with bash (its own process group, cwd $tmp/cwd,
# stdin /dev/null) with nodewatch and jq on PATH, CURATOR/NODEWATCH_CURATOR and
# NODEWATCH_ETCD pointing at the fixture and the extra environment in RENV; call ACT
# (a function: it makes the changes the recipe waits for) while it runs; record the
# snippet as run, stdout, stderr and exit code. A recipe that has not ended after 60s is
# killed and is a problem.
RENV=()
RGROUP=readme
recipe() {
	local name=$1 snippet=$2 act=${3:-} pid rc
	mkdir -p "$raw/$RGROUP"
	CUR_OUT=$raw/$RGROUP/$name.stdout
	printf '%s\n' "$snippet" >"$raw/$RGROUP/$name.sh"
	: >"$CUR_OUT"
	WATCHERS_BEFORE=0
	[[ -n ${ETCD:-} ]] && WATCHERS_BEFORE=$(etcd_watchers)
	WATCHERS_BEFORE=${WATCHERS_BEFORE:-0}
	(cd "$tmp/cwd" && exec setsid "${BASEENV[@]}" "CURATOR=${CURATOR:-}" "NODEWATCH_CURATOR=${CURATOR:-}" \
		"NODEWATCH_ETCD=${ETCD:-}" "${RENV[@]}" \
		bash -c 'reload-app() { echo "reload-app $1"; }'$'\n'"$snippet" \
		>"$CUR_OUT" 2>"$raw/$RGROUP/$name.stderr" </dev/null) &
	pid=$!
	CUR_PID=$pid
	PIDS+=("$pid")
	[[ -n $act ]] && "$act"
	local waited=0
	while kill -0 "$pid" 2>/dev/null && ((waited < 600)); do
		sleep 0.1
		waited=$((waited + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		problem "readme/$name: still running after 60s, killed"
		kill -KILL -- "-$pid" 2>/dev/null
	fi
	wait "$pid"
	rc=$?
	echo "$rc" >"$raw/$RGROUP/$name.exit"
}

# running: the current recipe has not ended.
running() { kill -0 "$CUR_PID" 2>/dev/null; }

# wait_out PATTERN: until the current recipe's stdout has a line matching the grep -E
# PATTERN (false if it ended first or after 30s: a problem).
wait_out() {
	for _ in $(seq 300); do
		grep -qE -- "$1" "$CUR_OUT" && return 0
		running || break
		sleep 0.1
	done
	grep -qE -- "$1" "$CUR_OUT" && return 0
	problem "recipe output never matched /$1/"
	return 1
}

# etcd_watchers: etcd's count of watchers (from its metrics).
etcd_watchers() { curl -s "${CURL_TLS[@]}" "$ETCD/metrics" | awk '$1 == "etcd_debugging_mvcc_watcher_total" { print $2 }'; }
CURL_TLS=()

# wait_etcd_watch BASE: until etcd has more watchers than BASE. A key watch is created
# after its listing, from the next revision: every write after this is a change to it.
# wait_new_etcd_watch: until etcd has more watchers than before the current recipe
# started.
wait_new_etcd_watch() { wait_etcd_watch "$WATCHERS_BEFORE"; }

wait_etcd_watch() {
	for _ in $(seq 300); do
		(($(etcd_watchers) > $1)) && return 0
		running || break
		sleep 0.1
	done
	problem "the recipe's etcd watch was never created"
	return 1
}

# wait_curator_sync: until the client connected to the fixture's serve has received its
# initial state (over 1000 bytes: the 5 nodes' backlog; a Watch without a backlog and a
# GetCurrentLeader take ~120). serve subscribes a stream before it sends the backlog, so
# every write after this is a change to it (with --changes-only nothing else shows it).
wait_curator_sync() {
	local b
	for _ in $(seq 300); do
		b=$(ss -tinH state established dst "$SERVE" | grep -o 'bytes_received:[0-9]*' | cut -d: -f2 | sort -n | tail -1)
		((${b:-0} > 1000)) && return 0
		running || break
		sleep 0.1
	done
	problem "the recipe never received its initial state from serve"
	return 1
}

# kick CMD…: run CMD every 0.3s while the recipe runs (at most 50 times), with the
# iteration number as its last argument. For pipelines that end only when nodewatch
# writes again after the reader has gone: what they print is already complete.
kick() {
	local i
	for i in $(seq 50); do
		running || return 0
		"$@" "$i"
		sleep 0.3
	done
}

# ---------------------------------------------------------------- TLS material

# ca NAME CN: a CA (ECDSA P-256).
ca() {
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-keyout "$pki/$1-key.pem" -out "$pki/$1.pem" -subj "/CN=$2" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null ||
		die "openssl: CA $1"
}
# leaf NAME CN CA SAN [ed25519]: a certificate for server and client use, signed by CA
# (serial numbers in order: serve logs the one it loads).
SERIAL=1000
leaf() {
	SERIAL=$((SERIAL + 1))
	local keyopts=(-newkey ec -pkeyopt ec_paramgen_curve:P-256)
	[[ ${5:-} == ed25519 ]] && keyopts=(-newkey ed25519)
	openssl req -new "${keyopts[@]}" -nodes -keyout "$pki/$1-key.pem" -out "$pki/$1.csr" -subj "/CN=$2" 2>/dev/null &&
		openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$3.pem" -CAkey "$pki/$3-key.pem" -set_serial "$SERIAL" \
			-days 2 -out "$pki/$1.pem" -extfile <(
				printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
				printf 'extendedKeyUsage=serverAuth,clientAuth\n'
				[[ -n $4 ]] && printf 'subjectAltName=%s\n' "$4"
			) 2>/dev/null || die "openssl: certificate $1"
}

# ================================================================ record

log "output into $OUT (work in $tmp)"

# README's shell blocks as they are -------------------------------------------
mkdir -p "$raw/readme"
readme_lines | awk -F'\t' '{ k = $1 " / block " $2; if (k != last) { print "==== " k; last = k } sub(/^[^\t]*\t[^\t]*\t/, ""); print }' \
	>"$raw/readme/blocks.txt"

# help, version, completion, man ---------------------------------------------
log "help"
rec help nodewatch.help -- --help
rec help nodewatch.h -- -h
for c in nodes node key serve sim completion version man; do
	rec help "$c.help" -- "$c" --help
done
rec help version -- version
sed -i '/^commit /d' "$raw/help/version.stdout"
for sh in bash zsh fish; do
	rec help "completion-$sh" -- completion "$sh"
done
rec help man -- man

# usage errors (no cluster needed) -------------------------------------------
log "usage errors"
# (anything that would connect is pointed at port 1, where nothing listens: not at the
# defaults, 127.0.0.1:2379 and :7835, where something of the machine's might)
U() { rec usage "$1" NODEWATCH_ETCD=http://127.0.0.1:1 NODEWATCH_CURATOR=127.0.0.1:1 "${@:2}"; }
U no-command -- 
U unknown-command -- bogus
U help-command -- help
U bad-global-flag -- --bogus
U key-no-key -- key
U key-two-keys -- key /a /b
U key-bad-flag -- key /x --bogus
U key-flag-needs-arg -- key /x --filter
U key-bad-jq -- key /x --filter '.['
U key-bad-equals -- key /x --equals '.[' 
U key-bad-until -- key /x --until 'nope('
U key-bad-output -- key /x -o yaml
U key-bad-value-mode -- key /x --value xml
U key-bad-count -- key /x --count -1
U key-bad-timeout -- key /x --timeout soon
U key-bad-arg -- key /x --arg onlyname
U key-bad-argjson -- key /x --argjson n '{'
U key-bad-key-pattern -- key /x --key-pattern '/x/{a}/{a}'
U key-mgmt-unknown-area -- key --mgmt nope
U key-kind-without-mgmt -- key /x --kind file
U key-for-with-strings -- key --mgmt strings --for h1
U key-for-bad-host -- key --mgmt exported --for a/b
U key-mgmt-with-key -- key --mgmt exported /x
U key-mgmt-with-pattern -- key --mgmt exported --key-pattern '/{a}'
U key-mgmt-bad-namespace -- key --mgmt exported --mgmt-namespace _mgmt
U key-mgmt-needs-arg -- key --mgmt
U key-missing-cacert -- key /x --cacert missing-ca.pem
U key-cert-without-key -- key /x --cert missing.pem
U key-bad-endpoint -- key /x --etcd 'http://[::1'
U nodes-arg -- nodes extra
U nodes-bad-output -- nodes -o yaml
U nodes-bad-filter -- nodes --filter '.['
U nodes-missing-cacert -- nodes --cacert missing-ca.pem
U nodes-bad-health-interval -- nodes --health --health-interval -1s
U node-no-id -- node
U node-slash-id -- node a/b --once --dial-timeout 500ms
U serve-plaintext-nonloopback -- serve --listen 0.0.0.0:7999 --etcd http://127.0.0.1:1
U serve-cert-without-key -- serve --listen-cert missing.pem
U serve-arg -- serve extra
U sim-bad-format -- sim --format xml
U sim-bad-nodes -- sim --nodes -3
U sim-arg -- sim extra
U completion-no-shell -- completion
U completion-bad-shell -- completion tcsh
U version-arg -- version extra
U key-no-etcd -- key /x --etcd http://127.0.0.1:1 --dial-timeout 500ms
U nodes-no-curator -- nodes --curator 127.0.0.1:1 --dial-timeout 500ms
U sim-no-etcd -- sim --etcd http://127.0.0.1:1 --dial-timeout 500ms --steps 1
U serve-no-etcd -- serve --listen 127.0.0.1:0 --etcd http://127.0.0.1:1 --dial-timeout 500ms

# the fixture ------------------------------------------------------------------
log "fixture: etcd, sim, mgmt World, serve"
fixture_up
mkdir -p "$raw/fixture"
cp "$tmp/sim.stdout" "$raw/fixture/sim.stdout"
cp "$tmp/sim.stderr" "$raw/fixture/sim.stderr"
cp "$tmp/sim.exit" "$raw/fixture/sim.exit"

# output shapes against the fixture -------------------------------------------
log "outputs"
NODE=$(node_ids '.state == "NODE_STATE_UP"' | head -1)
O() { rec output "$@"; }
E=(--etcd "$ETCD")
C=(--curator "$CURATOR")
for o in json pretty text; do
	O "key-prefix-once.$o" -- key /nodes/ --prefix "${E[@]}" --once -o "$o"
	O "nodes-once.$o" -- nodes "${C[@]}" --once -o "$o"
	O "node-once.$o" -- node "$NODE" "${C[@]}" --once -o "$o"
	O "nodes-health-once.$o" -- nodes "${C[@]}" --health --once -o "$o"
	O "key-mgmt-exported-once.$o" -- key --mgmt exported "${E[@]}" --once -o "$o"
	O "key-single-once.$o" -- key /config/app "${E[@]}" --once -o "$o"
done
O key-prefix-timestamps -- key /nodes/ --prefix "${E[@]}" --once --timestamps
O nodes-timestamps-text -- nodes "${C[@]}" --once --timestamps -o text
O key-missing-once -- key /nope "${E[@]}" --once
O key-whole-keyspace -- key / --prefix "${E[@]}" --once
O node-missing-once -- node metropolis-00000000000000000000000000000000 "${C[@]}" --once
O key-filter -- key /nodes/ --prefix "${E[@]}" --once --filter '.value.state == "NODE_STATE_UP"' -o text
O key-filter-arg -- key /nodes/ --prefix "${E[@]}" --once --filter '.value.status.external_address == $a' --arg a 10.62.125.7
O key-filter-argjson -- key /nodes/ --prefix "${E[@]}" --once --filter '.version >= $n' --argjson n 10 -o text
O key-filter-warning -- key /nodes/ --prefix "${E[@]}" --once --filter '.value.nope | test("x")'
O key-filter-strict -- key /nodes/ --prefix "${E[@]}" --once --strict --filter '.value.nope | test("x")'
O nodes-filter -- nodes "${C[@]}" --once --filter '.roles.consensus_member' -o text
O nodes-equals -- nodes "${C[@]}" --once --equals '.status.external_address' --changes-only
O nodes-until-met -- nodes "${C[@]}" --until '[.[] | select(.state == "NODE_STATE_UP")] | length >= 3' -o text
O nodes-until-unmet -- nodes "${C[@]}" --until 'length > 10' --timeout 1s -o text
O nodes-until-strict-error -- nodes "${C[@]}" --until '.[0].nope | test("x")' --strict --timeout 5s
O key-until-unmet -- key /nodes/ --prefix "${E[@]}" --until 'length > 10' --timeout 1s
O key-timeout-no-goal -- key /nodes/ --prefix "${E[@]}" --timeout 1s -o text
O key-count -- key /nodes/ --prefix "${E[@]}" --count 3
O nodes-count -- nodes "${C[@]}" --count 2 -o text
O key-changes-only-timeout -- key /nodes/ --prefix "${E[@]}" --changes-only --timeout 1s
for v in auto json text base64 gob query; do
	O "key-value-$v" -- key /_mgmt/ --prefix "${E[@]}" --once --value "$v"
done
O key-pattern -- key /_mgmt/exported/ --prefix "${E[@]}" --once --key-pattern '/_mgmt/exported/{to}/{from}/{kind}/{name...}' --value gob -o text
O key-pattern-mismatch -- key /_mgmt/ --prefix "${E[@]}" --once --key-pattern '/_mgmt/exported/{to}/{from}/{kind}/{name...}' -o text
for a in "exported --kind svc" "exported --from h1 --name /tmp/foo" "exported --for h3" "exported --for h3 --kind file -o text" "strings" "deploy" "scheduler" "strings -o text"; do
	read -r -a aa <<<"$a"
	O "key-mgmt-${a//[ \/]/_}" -- key --mgmt "${aa[@]}" "${E[@]}" --once
done
O key-mgmt-strict-filter -- key --mgmt exported "${E[@]}" --once --kind file --strict --filter '.value.Path | startswith("/srv") # files under /srv'
O key-mgmt-namespace-empty -- key --mgmt exported "${E[@]}" --once --mgmt-namespace /elsewhere
O key-env-etcd "NODEWATCH_ETCD=$ETCD" -- key /config/app --once
O nodes-env-curator "NODEWATCH_CURATOR=$CURATOR" -- nodes --once -o text
O nodes-two-endpoints -- nodes --curator "127.0.0.1:1,$CURATOR" --once -o text
O key-two-endpoints -- key /config/app --etcd "http://127.0.0.1:1,$ETCD" --once

# README: read-only recipes, on this fixture --------------------------------
log "README recipes"
QS="## Quick start"
RC="## Recipes"
MG="## Following mgmt's World"

# Quick start, block 1: `serve --dev &` is the fixture's serve (serve --dev seeds its
# simulation from the clock); the nodes that follow it run against it (NODEWATCH_CURATOR).
# nodes -o text follows forever: --once.
recipe quickstart-1-nodes-text "$(adapt "$(readme_cmd "$QS" 1 'nodewatch nodes -o text')" 's/nodewatch nodes -o text/nodewatch nodes --once -o text/')"
recipe quickstart-1-nodes-once-jq "$(readme_cmd "$QS" 1 'nodewatch nodes --once |')"
# Quick start, block 2: the etcd address of the fixture; follows forever: --once.
recipe quickstart-2-key-text "$(adapt "$(readme_cmd "$QS" 2 'nodewatch key')" \
	"s#http://127.0.0.1:PORT#$ETCD#" 's/ -o text$/ -o text --once/')"
# Recipes 1: ends by itself (three nodes are UP).
recipe recipes-1-wait-three-up "$(readme_block "$RC" 1)"
# Recipes 6: ends by itself.
recipe recipes-6-count-by-state "$(readme_block "$RC" 6)"
fixture_down fixture

# README: recipes that wait for changes, each on a fixture of its own ----------
# up_nodes FORMAT N: every node that is not UP comes UP, one at a time, each once the
# recipe has printed its change (FORMAT: printf format of the line to wait for, given the
# batch number, first N, and the node's id): a batch per change, whatever the machine's
# speed.
up_nodes() {
	local fmt=$1 n=$2 id
	for id in $(node_ids '.state != "NODE_STATE_UP"'); do
		etxn "/nodes/$id" "$(node_value "$id" | jq -c '.state = "NODE_STATE_UP"')"
		# shellcheck disable=SC2059
		wait_out "$(printf "$fmt" "$n" "$id")" || return 1
		n=$((n + 1))
	done
}
new_node() { # new_node ID ADDR: a NEW node (a copy of the first record, renamed)
	local first
	first=$(node_ids true | head -1)
	node_value "$first" | jq -c --arg id "$1" --arg a "$2" \
		'.id = $id | .state = "NODE_STATE_NEW" | .status.external_address = $a | del(.roles.consensus_member)'
}

# Quick start, block 1, last line: waits (up to 1m) for four UP nodes; the fixture has
# three; once the initial state is out, one more comes up, and the run ends.
act_qs_until() {
	wait_out '"batch_done"' || return
	local id
	id=$(node_ids '.state != "NODE_STATE_UP"' | head -1)
	etxn "/nodes/$id" "$(node_value "$id" | jq -c '.state = "NODE_STATE_UP"')"
	wait_out '"batch":2,'
}
in_fixture quickstart-1-until-five-up "$(readme_cmd "$QS" 1 'nodewatch nodes --until')" act_qs_until

# Recipes 2: three nodes up and healthy; all five must be UP and HEALTHY (all(...)): once
# the initial state is out, the two others come UP, one after the other; then every
# record says health HEALTHY (one transaction; the next GetNodes poll shows it).
act_health() {
	wait_out 'batch 1 \(initial\)' || return
	up_nodes 'updated +%.0s%s ' 2 || return
	local args=() id
	for id in $(node_ids true); do
		args+=("/nodes/$id" "$(node_value "$id" | jq -c '. + {health: "HEALTHY"}')")
	done
	etxn "${args[@]}"
}
in_fixture recipes-2-wait-three-healthy "$(readme_block "$RC" 2)" act_health

# Recipes 3: the loop never ends: `break` after its first reaction (as the tests do).
# A node comes UP once the recipe has its initial state; more come up until the pipeline
# ends.
act_join() {
	wait_curator_sync || return
	etxn /nodes/metropolis-0000000000000000000000000000aa01 "$(up_node metropolis-0000000000000000000000000000aa01 10.9.0.1)"
	wait_out '^up:' || return
	kick join_more
}
join_more() { local id; id=$(printf 'metropolis-0000000000000000000000000000bb%02d' "$1"); etxn "/nodes/$id" "$(up_node "$id" "10.9.1.$1")"; }
up_node() { new_node "$1" "$2" | jq -c '.state = "NODE_STATE_UP"'; } # up_node ID ADDR
in_fixture recipes-3-react-to-node-up "$(adapt "$(readme_block "$RC" 3)" '0,/^done$/s//break; done/')" act_join

# Recipes 4: /config/app is {"v":"initial"} in the fixture; once the recipe's watch
# exists: {"v":1}, the same value again (no reload), {"v":2}, then the key is deleted,
# which ends it. reload-app is a function that echoes its argument.
act_config() {
	wait_new_etcd_watch || return
	etxn /config/app '{"v":1}'
	wait_out '^reload-app \{"v":1\}' || return
	etxn /config/app '{"v":1}'
	etxn /config/app '{"v":2}'
	wait_out '^reload-app \{"v":2\}' || return
	etxn /config/app -DELETE-
}
in_fixture recipes-4-follow-config-key "$(readme_block "$RC" 4)" act_config

# Recipes 5: never ends: `| head -n 1` (as the tests do). Once the recipe has its initial
# state, one UP node gets a new address; more addresses follow until the pipeline ends.
act_update() {
	wait_curator_sync || return
	UPD=$(node_ids '.state == "NODE_STATE_UP"' | head -1)
	etxn "/nodes/$UPD" "$(node_value "$UPD" | jq -c '.status.external_address = "10.200.0.1"')"
	wait_out . || return
	kick update_more
}
update_more() { etxn "/nodes/$UPD" "$(node_value "$UPD" | jq -c --arg a "10.200.1.$1" '.status.external_address = $a')"; }
fixture_up
snippet=$(readme_block "$RC" 5)
recipe recipes-5-what-changed "${snippet%$'\n'} | head -n 1" act_update
fixture_down

# Recipes 7: ends once head has gone and nodewatch writes again. Once the recipe has its
# initial state, the DECOMMISSIONED node is deleted; then nodes join and are deleted
# until the pipeline ends.
act_delete() {
	wait_curator_sync || return
	etxn "/nodes/$(node_ids '.state == "NODE_STATE_DECOMMISSIONED"' | head -1)" -DELETE-
	wait_out . || return
	kick churn
}
churn() {
	local id
	id=$(printf 'metropolis-0000000000000000000000000000cc%02d' "$1")
	etxn "/nodes/$id" "$(new_node "$id" 10.9.2.1)"
	etxn "/nodes/$id" -DELETE-
}
in_fixture recipes-7-first-deletion "$(readme_block "$RC" 7)" act_delete

# mgmt 1: follows forever: --count 4 (the two files h3 collects, then one more exported
# to h3 and the deletion of /tmp/foo, made once the recipe's watch exists).
act_mgmt_for() {
	wait_new_etcd_watch || return
	etxn '/_mgmt/exported/h2/h1/file//etc/issue' "not h3's: x"
	etxn '/_mgmt/exported/h3/h4/file//opt/z' "${GOB['/_mgmt/exported/h3/h4/file//opt/z']}"
	wait_out '^h4 /opt/z' || return
	etxn '/_mgmt/exported/*/h1/file//tmp/foo' -DELETE-
}
in_fixture mgmt-1-files-exported-to-h3 "$(adapt "$(readme_block "$MG" 1)" 's/--kind file \|/--kind file --count 4 |/')" act_mgmt_for

# mgmt 2: ends by itself once h3 exports nginx, which it does once the watch exists.
act_mgmt_until() {
	wait_new_etcd_watch || return
	etxn '/_mgmt/exported/*/h3/svc/nginx' "${GOB['/_mgmt/exported/*/h3/svc/nginx']}"
}
in_fixture mgmt-2-wait-for-nginx "$(readme_block "$MG" 2)" act_mgmt_until

# mgmt 3: follows forever: --count 2 (the schedule, then its change to h2,h3 made once
# the watch exists).
act_mgmt_sched() {
	wait_new_etcd_watch || return
	etxn /_mgmt/scheduler/schedule/web h2,h3
}
in_fixture mgmt-3-scheduler-choice "$(adapt "$(readme_block "$MG" 3)" "s/(--filter '[^']*')/\\1 --count 2/")" act_mgmt_sched

# README: TLS, auth, metroctl, serve with mTLS --------------------------------
# An etcd with TLS, client certificates required, and auth: users root (certificate),
# alice (password alice-pw, reads /app/), serve-etcd (certificate, reads /nodes/). A
# cluster CA signs serve's certificate (CN metropolis-…, name serve.example.net), the
# clients' (me), metroctl's owner (Ed25519); another CA signs nothing we trust.
log "TLS fixture"
pki=$tmp/cwd # the recipes name the files relative to their directory
ca etcd-ca "nodewatch recipes etcd CA"
leaf etcd "etcd" etcd-ca "IP:127.0.0.1,DNS:localhost"
leaf root root etcd-ca ""
leaf alice alice etcd-ca ""
leaf serve-etcd serve-etcd etcd-ca ""
ca serve-ca "Metropolis cluster CA"
leaf serve "metropolis-5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7e" serve-ca "DNS:serve.example.net"
leaf me "me" serve-ca ""
leaf owner "owner" serve-ca "" ed25519
ca other-ca "Another cluster CA"
leaf other "metropolis-0712e70712e70712e70712e70712e707" other-ca "DNS:serve.example.net"
cp "$pki/serve-ca.pem" "$pki/clients-ca.pem"
cp "$pki/etcd-ca.pem" "$pki/ca.pem"
cp "$pki/me-key.pem" "$pki/me.key"
metroctl=$tmp/home/.config/metroctl
mkdir -p "$metroctl" "$tmp/secure/metroctl" "$tmp/other/metroctl" "$tmp/secrets"
# metroctl's owner key: the raw Ed25519 key (seed, then public key) in its own PEM type.
{
	echo "-----BEGIN METROPOLIS INITIAL OWNER PRIVATE KEY-----"
	{
		openssl pkey -in "$pki/owner-key.pem" -outform DER | tail -c 32
		openssl pkey -in "$pki/owner-key.pem" -pubout -outform DER | tail -c 32
	} | base64 -w 64
	echo "-----END METROPOLIS INITIAL OWNER PRIVATE KEY-----"
} >"$tmp/owner-key.metroctl.pem"
for d in "$metroctl" "$tmp/secure/metroctl" "$tmp/other/metroctl"; do
	cp "$pki/serve-ca.pem" "$d/ca.pem"
	cp "$pki/owner.pem" "$d/owner.pem"
	cp "$tmp/owner-key.metroctl.pem" "$d/owner-key.pem"
done
cp "$pki/other-ca.pem" "$tmp/other/metroctl/ca.pem"
printf 'alice-pw\n' >"$tmp/secrets/etcd-alice"
rm -f "$pki"/*.csr

ECTL_FLAGS=(--cacert "$pki/etcd-ca.pem" --cert "$pki/root.pem" --key "$pki/root-key.pem")
CURL_TLS=(--cacert "$pki/etcd-ca.pem" --cert "$pki/root.pem" --key "$pki/root-key.pem")
start_etcd tls "$pki"
TLS_ETCD_PID=$ETCD_PID
"${BASEENV[@]}" "$NW" sim --etcd "$ETCD" --cacert "$pki/etcd-ca.pem" --cert "$pki/root.pem" --key "$pki/root-key.pem" \
	--nodes 5 --rate 0 --steps 40 --seed 1 >/dev/null 2>"$tmp/sim-tls.stderr" </dev/null || die "sim (TLS) failed"
etxn /app/config '{"feature":"on"}' /app/limits '{"max":10}' /other/secret s3cr3t
{
	ectl user add root --new-user-password root-pw --interactive=false &&
		ectl user grant-role root root &&
		ectl role add app-reader && ectl role grant-permission app-reader --prefix=true read /app/ &&
		ectl user add alice --new-user-password alice-pw --interactive=false &&
		ectl user grant-role alice app-reader &&
		ectl role add nodes-reader && ectl role grant-permission nodes-reader --prefix=true read /nodes/ &&
		ectl user add serve-etcd --no-password && ectl user grant-role serve-etcd nodes-reader &&
		ectl auth enable
} >/dev/null 2>"$tmp/auth.log" || { cat "$tmp/auth.log" >&2; die "etcd auth setup failed"; }
TLS_ETCD=$ETCD
TLS_EP="127.0.0.1:$ETCD_PORT"

SEC="## etcd with TLS and auth"
MC="## A Metropolis cluster, with metroctl's credentials"
SM="## serve with mTLS"

# etcd with TLS and auth, 1: the password prompt needs a terminal; there is none here
# (what nodewatch says then is recorded). Both endpoints are the TLS etcd; --once.
recipe tls-1-alice-prompt "$(adapt "$(readme_cmd "$SEC" 1 'nodewatch key --prefix /app/')" \
	"s#https://etcd-0:2379,https://etcd-1:2379#https://$TLS_EP,https://localhost:${TLS_EP#*:}#" \
	's#/etc/etcd/ca.pem#ca.pem#' 's/--user alice$/--user alice --once/')"
# ... and with the password from NODEWATCH_PASSWORD (not part of the recipe).
RENV=(NODEWATCH_PASSWORD=alice-pw)
recipe tls-1-alice-env "$(adapt "$(readme_cmd "$SEC" 1 'nodewatch key --prefix /app/')" \
	"s#https://etcd-0:2379,https://etcd-1:2379#https://$TLS_EP,https://localhost:${TLS_EP#*:}#" \
	's#/etc/etcd/ca.pem#ca.pem#' 's/--user alice$/--user alice --once/')"
RENV=()
# etcd with TLS and auth, 2: the secret from a file here; this etcd requires client
# certificates, which the recipe does not give (what nodewatch says is recorded); then
# with alice's certificate added.
s2=$(adapt "$(readme_cmd "$SEC" 1 'NODEWATCH_PASSWORD=')" "s#/run/secrets/etcd-alice#$tmp/secrets/etcd-alice#" \
	"s#https://etcd-0:2379#https://$TLS_EP#")
recipe tls-2-password-env "$s2"
recipe tls-2-password-env-with-cert "$(adapt "$s2" 's/--user alice --once/--user alice --cert alice.pem --key alice-key.pem --once/')"
# What the section says of a wrong password and of a role that cannot read.
rec readme tls-wrong-password NODEWATCH_PASSWORD=wrong -- key /app/config --etcd "https://$TLS_EP" --cacert ca.pem --cert alice.pem --key alice-key.pem --user alice --once
rec readme tls-not-permitted NODEWATCH_PASSWORD=alice-pw -- key /nodes/ --prefix --etcd "https://$TLS_EP" --cacert ca.pem --cert alice.pem --key alice-key.pem --user alice --once
rec readme tls-user-password-inline -- key /app/ --prefix --etcd "https://$TLS_EP" --cacert ca.pem --cert alice.pem --key alice-key.pem --user alice:alice-pw --once -o text
rec readme tls-no-client-cert -- key /app/config --etcd "https://$TLS_EP" --cacert ca.pem --once
rec readme tls-wrong-ca -- key /app/config --etcd "https://$TLS_EP" --cacert other-ca.pem --cert root.pem --key root-key.pem --once
rec readme tls-key-not-cert -- key /app/config --etcd "https://$TLS_EP" --cacert ca.pem --cert root.pem --key alice-key.pem --once
rec readme tls-cert-as-root -- key /app/ --prefix --etcd "https://$TLS_EP" --cacert ca.pem --cert root.pem --key root-key.pem --once -o text
rec readme tls-skip-verify -- key /app/config --etcd "https://$TLS_EP" --insecure-skip-tls-verify --cert root.pem --key root-key.pem --once

# serve with mTLS: serve over the TLS etcd, on a free loopback port instead of
# 0.0.0.0:7835; its client, at that address (--tls-server-name still checks the name);
# --once. Then the rotation: new files renamed over the old ones, and SIGHUP to this serve
# (not pkill -f, which would reach every serve on the machine), the client again; serve
# is stopped with SIGTERM, its stderr and exit code recorded.
serve_cmd=$(readme_cmd "$SM" 1 'nodewatch serve --etcd')
read -r -a serve_args <<<"$(printf '%s\n' "$serve_cmd" | tr -d '\\\n' | sed -E 's/^nodewatch serve //')"
sargs=()
skip=0
for a in "${serve_args[@]}"; do
	if ((skip)); then skip=0; continue; fi
	case $a in
	--listen) skip=1 ;; # start_serve gives --listen
	https://etcd-0:2379) sargs+=("https://$TLS_EP") ;;
	*) sargs+=("$a") ;;
	esac
done
printf 'nodewatch serve %s --listen 127.0.0.1:PORT\n' "${sargs[*]}" >"$tmp/serve-tls.sh"
start_serve tls "${sargs[@]}"
TLS_SERVE_PID=$SERVE_PID
TLS_SERVE=$SERVE
mkdir -p "$raw/readme"
cp "$tmp/serve-tls.sh" "$raw/readme/serve-mtls-1-serve.sh"
client=$(adapt "$(readme_cmd "$SM" 1 'nodewatch nodes')" "s#serve.example.net:7835#$TLS_SERVE#" 's/--key me-key.pem$/--key me-key.pem --once/')
recipe serve-mtls-1-client "$client"
# rotate: a new certificate, renamed over the old one; SIGHUP.
leaf serve-new "metropolis-5e7e5e7e5e7e5e7e5e7e5e7e5e7e5e7f" serve-ca "DNS:serve.example.net"
mv "$pki/serve-new.pem" "$pki/serve.pem"
mv "$pki/serve-new-key.pem" "$pki/serve-key.pem"
rm -f "$pki/serve-new.csr"
adapt "$(readme_cmd "$SM" 1 'pkill -HUP')" "s#pkill -HUP -f 'nodewatch serve'#kill -HUP \$SERVE_PID#" >"$raw/readme/serve-mtls-2-rotate.sh"
kill -HUP "$TLS_SERVE_PID"
for _ in $(seq 100); do grep -qi 'certificate' "$tmp/serve-tls.stderr" && break; sleep 0.1; done
recipe serve-mtls-3-client-after-rotation "$client"
rec readme serve-mtls-client-without-cert -- nodes --curator "$TLS_SERVE" --cacert serve-ca.pem --tls-server-name serve.example.net --once --metroctl-config ''
rec readme serve-mtls-client-wrong-name -- nodes --curator "$TLS_SERVE" --cacert serve-ca.pem --tls-server-name other.example.net --cert me.pem --key me-key.pem --once
rec readme serve-mtls-client-plaintext -- nodes --curator "$TLS_SERVE" --metroctl-config '' --once --dial-timeout 1s

# A Metropolis cluster, with metroctl's credentials: the Curator is the mTLS serve above
# (its CA is the cluster CA in metroctl's ca.pem), ~ is a home of our own holding
# .config/metroctl; the local plaintext serve of the last line is a fixture's; --once.
fixture_up
recipe metroctl-1-default "$(adapt "$(readme_cmd "$MC" 1 'found by default')" \
	"s#10.0.0.1:7835,10.0.0.2:7835#$TLS_SERVE,localhost:${TLS_SERVE#*:}#" 's/ +#/ --once  #/')"
recipe metroctl-2-config-dir-health "$(adapt "$(readme_cmd "$MC" 1 '--metroctl-config /secure/metroctl')" \
	"s#10.0.0.1:7835#$TLS_SERVE#" "s#/secure/metroctl#$tmp/secure/metroctl#" 's/-o text$/-o text --once/')"
recipe metroctl-3-none "$(adapt "$(readme_cmd "$MC" 1 "--metroctl-config ''")" \
	"s#127.0.0.1:7835#$CURATOR#" 's/ +#/ --once  #/')"
# "A node signed by another cluster's CA is refused".
rec readme metroctl-other-cluster-ca -- nodes --curator "$TLS_SERVE" --metroctl-config "$tmp/other/metroctl" --once
rec readme metroctl-plaintext-serve -- nodes --curator "$CURATOR" --once
# Quick start, block 2 (a real cluster): the mTLS serve, with metroctl's credentials
# found by default (the home above), and --health; --once.
recipe quickstart-2-real-cluster "$(adapt "$(readme_cmd "$QS" 2 'nodewatch nodes')" \
	"s#10.0.0.1:7835,10.0.0.2:7835#$TLS_SERVE,localhost:${TLS_SERVE#*:}#" 's/-o text$/-o text --once/')"
fixture_down fixture-2

stop_proc serve-tls "$TLS_SERVE_PID" readme
stop_proc etcd "$TLS_ETCD_PID"

# golden files and the tests that compare with them --------------------------
log "golden tests"
mkdir -p "$OUT/golden" "$raw/golden-tests"
mapfile -t gdirs < <(cd "$root" && grep -l 'flag.Bool("update"' $(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go') | xargs -n1 dirname | sort -u)
: >"$raw/golden-tests/results.txt"
for d in "${gdirs[@]}"; do
	# The tests of d that compare with a golden file: they call golden( or read *update.
	tests=$(cd "$root/$d" && awk '
		/^func Test[A-Za-z0-9_]*\(/ { match($0, /Test[A-Za-z0-9_]*/); cur = substr($0, RSTART, RLENGTH) }
		/^func [^T]|^func \(/ { cur = "" }
		cur != "" && /golden\(|\*update/ { print cur }
	' *_test.go | sort -u | paste -sd '|')
	if [[ -n $tests ]]; then
		log "  $d: ${tests//|/ }"
		(cd "$root" && go test -count=1 -json -run "^($tests)\$" "./$d") >"$tmp/gotest.json" 2>"$tmp/gotest.stderr"
		rc=$?
		jq -r 'select(.Test != null and (.Action == "pass" or .Action == "fail" or .Action == "skip")) | "\(.Action) \(.Test)"' \
			"$tmp/gotest.json" | sort >>"$raw/golden-tests/results.txt"
		[[ $rc == 0 ]] || { problem "golden tests in $d failed"; cat "$tmp/gotest.stderr" >&2; }
	fi
	if [[ -d $root/$d/testdata ]]; then
		while IFS= read -r f; do
			[[ -e $OUT/golden/$f ]] && problem "two golden files named $f"
			mkdir -p "$OUT/golden/$(dirname "$f")"
			cp "$root/$d/testdata/$f" "$OUT/golden/$f"
		done < <(cd "$root/$d/testdata" && find . -type f -not -path './fuzz/*' | sed 's#^\./##' | sort)
	fi
done
sort -o "$raw/golden-tests/results.txt" "$raw/golden-tests/results.txt"

# ---------------------------------------------------------------- normalize into OUT
log "normalizing"
portexpr=""
for p in "${PORTS[@]}"; do portexpr+="s/:$p([^0-9]|\$)/:PORT\\1/g;"; done
(cd "$raw" && find . -type f | sort) | while IFS= read -r f; do
	mkdir -p "$OUT/$(dirname "$f")"
	sed -E -e "s#$tmp#TMP#g" -e "$portexpr" \
		-e 's/^[0-9]{2}:[0-9]{2}:[0-9]{2} /HH:MM:SS /' \
		-e 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z /TIMESTAMP /' \
		-e 's/"ts":"[^"]*"/"ts":"TS"/g' \
		-e 's/"lease":[1-9][0-9]*/"lease":LEASE/g' \
		-e 's/expires [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z/expires DATE/g' \
		-e 's/(127\.0\.0\.1|\[::1\]):[0-9]+->/\1:EPHEMERAL->/g' \
		-e 's/(requires a client certificate) \((write tcp|read tcp|remote error)[^)]*\)/\1 (CAUSE)/g' \
		"$raw/$f" >"$OUT/$f"
	case $f in
	*.stderr)
		# measured durations (Go's forms with a fraction, or in ms/µs/ns); a run of lines
		# that differ only in them (retries) is one line.
		sed -E -i -e 's/[0-9]+(h[0-9]+)?(m[0-9]+)?(\.[0-9]+)?(ns|µs|us|ms|s)\b/DUR/g' "$OUT/$f"
		awk '!($0 == last && /DUR/) { print } { last = $0 }' "$OUT/$f" >"$OUT/$f.tmp" && mv "$OUT/$f.tmp" "$OUT/$f"
		;;
	esac
done

n=$(find "$OUT" -name '*.exit' | wc -l)
ng=$(find "$OUT/golden" -type f | wc -l)
log "recorded $n runs (stdout, stderr, exit code each) and $ng golden files into $OUT"
if ((${#PROBLEMS[@]})); then
	log "${#PROBLEMS[@]} problem(s):"
	printf '  %s\n' "${PROBLEMS[@]}" >&2
	exit 1
fi
