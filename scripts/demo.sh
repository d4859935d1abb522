#!/usr/bin/env bash
# demo.sh: train the bundled demo model with a slow data loader (the most
# common way a real run wastes its GPU), then let trainwatch analyze its log.
set -euo pipefail
build=${1:-build}
out=demo-run
mkdir -p "$out"
echo "== training examples/demo-train with a slow data loader (--slow-reader 10: 10 ms of decoding per batch)"
"$build/demo-train" --epochs 3 --steps-per-epoch 40 --log-interval 5 --slow-reader 10 --log "$out/train.log"
echo "== trainwatch analyze $out/train.log"
status=0
"$build/trainwatch" analyze "$out/train.log" || status=$?
# 0: healthy or warnings only, 1: errors found; both are a finished analysis.
[ "$status" -le 1 ] || exit "$status"
echo
echo "Try the other faults: $build/demo-train --help"
