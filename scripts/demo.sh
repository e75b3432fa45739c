#!/usr/bin/env bash
# make demo: start `nodewatch serve --dev` (embedded etcd + simulated fleet),
# wait until it serves, then follow it with `nodewatch nodes -o text` for
# DEMO_SECONDS (default 20) or until Ctrl-C, and say how to get the JSON
# stream. Needs nothing but the built binary.
set -euo pipefail
bin=$(realpath "${1:-bin/nodewatch}")
addr=${DEMO_ADDR:-127.0.0.1:7835}
secs=${DEMO_SECONDS:-20}

log=$(mktemp)
"$bin" serve --dev --listen "$addr" --dev-nodes 5 --dev-rate 2 2>"$log" &
serve=$!
trap 'kill -INT $serve 2>/dev/null; wait $serve 2>/dev/null || true; rm -f "$log"' EXIT

# serve logs "serving Curator Watch on ADDR" once it listens; until then a
# client would only print connection errors. Its log is shown if it fails.
for ((i = 0; ; i++)); do
	grep -q "serving Curator Watch" "$log" && break
	if ! kill -0 "$serve" 2>/dev/null || ((i == 600)); then
		echo "demo: nodewatch serve --dev did not start:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done

echo "demo: a simulated fleet of 5 nodes on $addr; following it for ${secs}s (Ctrl-C to stop):" >&2
echo "demo: nodewatch nodes --curator $addr -o text --equals 'del(.status.timestamp)'" >&2
echo "demo: (--equals leaves out heartbeats, updates of .status.timestamp alone)" >&2
set +e
"$bin" nodes --curator "$addr" -o text --equals 'del(.status.timestamp)' --timeout "${secs}s"
code=$?
set -e
# 0: the timeout passed as asked; 130: Ctrl-C. Both end the demo cleanly.
if [[ $code -ne 0 && $code -ne 130 ]]; then
	echo "demo: nodewatch nodes exited $code; the log of nodewatch serve --dev:" >&2
	cat "$log" >&2
	exit "$code"
fi
# The last line is one to paste: the binary by its full path (make build
# does not put it in PATH), and a server of its own, since this one stops
# now.
echo "demo: that was -o text, for people; scripts read the same stream as JSON. Paste this to try it (it starts serve --dev, then stops it):" >&2
echo "(nw=$bin; \$nw serve --dev --listen $addr 2>/dev/null & \$nw nodes --curator $addr --once 2>/dev/null | jq -c '{type, id, state: .object.state}'; kill \$!)" >&2
