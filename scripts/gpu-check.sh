#!/usr/bin/env bash
# gpu-check.sh: the real-GPU check of `trainwatch run`, for a machine with an
# NVIDIA GPU and driver (the tests use a stand-in NVML library). Builds if
# needed, runs the demo trainer under trainwatch run with the real
# libnvidia-ml.so.1, scrapes /metrics once during the run and prints the GPU
# series (and the cost series: the demo holds no GPU memory, so its GPU time
# is 0 there) and the end-of-run summary. Exits non-zero if no GPU series
# appear.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ ! -x "$build/trainwatch" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)" --target trainwatch demo-train >/dev/null
fi
nvidia-smi -L || true
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
unset TW_NVML_LIBRARY
"$build/trainwatch" run --no-history --web.listen-address "127.0.0.1:$port" --web.linger 0 --gpu-hour-cost 2.49 -- \
  "$build/demo-train" --epochs 3 --steps-per-epoch 40 --log-interval 5 --slow-reader 50 \
  >"$out/stdout" 2>"$out/stderr" &
pid=$!
sleep 4
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^(DCGM_|trainwatch_gpu|trainwatch_cost)' | tee "$out/gpu.txt" || true
wait "$pid" || true
echo "---- summary"
grep -E 'NVML|GPU' "$out/stderr" || true
tail -5 "$out/stderr"
[ -s "$out/gpu.txt" ] || { echo "gpu-check: no GPU series were exposed" >&2; exit 1; }
echo "gpu-check: OK"
