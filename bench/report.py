#!/usr/bin/env python3
"""bench/report.py: the HTML report of a long run stays small.

Writes a 1,000,000-step PaddleOCR-style log (loss with a one-step spike
every 100,000 steps, a NaN at step 777,777, ten loss parts, accuracy and a
gradient norm, memory growing, timestamps one second apart) and a paddle
default.gpu.log of 8 GPUs sampled every 30 s over the run, runs
`trainwatch analyze --html` over both and prints the page's size, the time
taken, and whether the spikes survived the downsampling (the loss chart's
maximum is the spike's value): the worst case of every chart at once.

Usage: bench/report.py BUILD_DIR [STEPS]   (default 1000000). Not a test.
"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

PARTS = ", ".join(f"loss_part{k}: {{part{k}}}" for k in range(10))
LINE = ("[{stamp}] ppocr INFO: epoch: [1/1], global_step: {n}, lr: 0.001000, loss: {loss}, " + PARTS +
        ", acc: {acc}, grad_norm: {norm}, avg_reader_cost: 0.01036 s, avg_batch_cost: 0.53538 s, avg_samples: 16.0, ips: 29.86095 samples/s, "
        "eta: 0:00:00, max_mem_reserved: {mem} MB\n")


def stamp(n):
    t = time.gmtime(1710000000 + n)
    return time.strftime("%Y/%m/%d %H:%M:%S", t)


def gpu_log(path, steps):
    with open(path, "w") as f:
        f.write("index,utilization_gpu,memory_total,memory_used,memory_free,timestamp\n")
        for n in range(0, steps + 1, 30):
            t = time.gmtime(1710000000 + n)
            clock = time.strftime("%Y/%m/%d %H:%M:%S", t) + ".000"
            for g in range(8):
                used = 9000 + (n // 1000 + g * 37) % 3000
                f.write(f"{g},{(n // 30 + g * 11) % 101},81920,{used},{81920 - used},{clock}\n")


def main():
    build = pathlib.Path(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "long.log"
        with open(log, "w") as f:
            for n in range(1, steps + 1):
                loss = "nan" if n == 777_777 else ("9.5" if n % 100_000 == 0 else f"{1 + 1 / (1 + n / 1000):.6f}")
                parts = {f"part{k}": f"{(k + 1) / (1 + n / 1000):.6f}" for k in range(10)}
                f.write(LINE.format(stamp=stamp(n), n=n, loss=loss, mem=1000 + n // 1000, acc=f"{n / steps:.6f}",
                                    norm=f"{1 + (n % 977) / 977:.6f}", **parts))
        gpu = pathlib.Path(tmp) / "default.gpu.log"
        gpu_log(gpu, steps)
        html = pathlib.Path(tmp) / "long.html"
        start = time.perf_counter()
        subprocess.run([str(build / "trainwatch"), "analyze", "--html", str(html), str(log), str(gpu)],
                       stdout=subprocess.DEVNULL, check=False)
        took = time.perf_counter() - start
        page = html.read_text()
        data = [json.loads(m) for m in re.findall(r'<script type="application/json" class="chart-data">(.*?)</script>',
                                                  page)]
        loss = next(d for d in data if d["id"] == "chart-loss")["series"][0]
        print(f"{steps} steps, log {log.stat().st_size / 2**20:.0f} MiB: page {html.stat().st_size / 2**20:.2f} MiB "
              f"({html.stat().st_size} bytes) in {took:.1f} s")
        print(f"loss chart: {loss['points']} points kept by the run, {loss['drawn']} drawn, max {loss['max']} "
              f"(the spikes are 9.5), {loss['not_finite']} not finite")
        for d in data:
            print(f"  {d['id']}: {len(d['series'])} series, {sum(x['drawn'] for x in d['series'])} points drawn")


if __name__ == "__main__":
    main()
