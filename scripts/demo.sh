#!/usr/bin/env bash
# make demo: start `nodewatch serve --dev` (embedded etcd + simulated fleet)
# and stream `nodewatch nodes` from it for DEMO_SECONDS (default 20) or
# until Ctrl-C. Needs nothing but the built binary.
set -euo pipefail
bin=${1:-bin/nodewatch}
addr=${DEMO_ADDR:-127.0.0.1:7835}
secs=${DEMO_SECONDS:-20}

"$bin" serve --dev --listen "$addr" --dev-nodes 5 --dev-rate 2 &
serve=$!
trap 'kill -INT $serve 2>/dev/null; wait $serve 2>/dev/null || true' EXIT

echo "demo: nodewatch nodes --curator $addr --timeout ${secs}s   (NDJSON on stdout; Ctrl-C to stop)" >&2
set +e
"$bin" nodes --curator "$addr" --dial-timeout 30s --timeout "${secs}s"
code=$?
set -e
# 0: the timeout passed as asked; 130: Ctrl-C. Both end the demo cleanly.
if [[ $code -ne 0 && $code -ne 130 ]]; then
	echo "demo: nodewatch nodes exited $code" >&2
	exit "$code"
fi
