#!/usr/bin/env bash
# demo.sh: train the bundled demo model under `trainwatch run` with a fault
# injected (a slow data loader, the most common way a real run wastes its
# GPU), with /metrics served on 127.0.0.1; trainwatch prints the diagnosis at
# the end. Then `trainwatch analyze` reads the same log again, offline. Last,
# the Python package's numpy example (examples/python/) trains in-process
# and analyze reads the log it wrote.
set -euo pipefail
build=${1:-build}
out=demo-run
mkdir -p "$out"
rm -f "$out"/train.log*
port=${TW_DEMO_PORT:-9464}
echo "== trainwatch run -- demo-train --slow-reader 10   (10 ms of decoding per batch; /metrics on 127.0.0.1:$port)"
status=0
"$build/trainwatch" run --web.listen-address "127.0.0.1:$port" --log-file "$out/train.log" --report "$out/report.json" --html "$out/report.html" -- \
  "$build/demo-train" --epochs 3 --steps-per-epoch 40 --log-interval 5 --slow-reader 10 || status=$?
[ "$status" -eq 0 ] || exit "$status"
echo
echo "== the same log, offline: trainwatch analyze $out/train.log"
status=0
"$build/trainwatch" analyze "$out/train.log" >/dev/null || status=$?
# 0: healthy or warnings only, 1: errors found; both are a finished analysis.
[ "$status" -le 1 ] || exit "$status"
echo "(report written to $out/report.json and $out/report.html; try the other faults: $build/demo-train --help)"
echo
echo "== in-process, from Python: examples/python/train_numpy.py (import trainwatch: setup_logger, metrics, the"
echo "   Paddle callback's call sequence) with a slow reader (3 ms per batch), then trainwatch analyze on its log"
rm -rf "$out/python"
PYTHONUNBUFFERED=1 PYTHONPATH="$build/python" /usr/bin/python3 examples/python/train_numpy.py --log-dir "$out/python" --slow-reader 3
status=0
"$build/trainwatch" analyze "$out/python/train.log" || status=$?
[ "$status" -le 1 ] || exit "$status"
