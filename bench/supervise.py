#!/usr/bin/env python3
"""bench/supervise.py: what supervision costs a training run.

1. Overhead: the demo trainer's wall time alone against under
   `trainwatch run` (median of 5 interleaved runs each, same session).
2. CPU per log rate: `trainwatch watch` following a file written at a fixed
   rate; its CPU seconds per second of wall time, per 1,000 lines/s.
3. Memory: `watch` peak RSS after following GB of log (rotated by rename
   every GB, so the disk holds at most 2 GB).

Usage: bench/supervise.py BUILD_DIR [GB]   (default 10). Not a test.
"""
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LINE = ("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/500], global_step: {n}, lr: 0.001000, loss: 0.609742, "
        "avg_reader_cost: 0.01036 s, avg_batch_cost: 0.53538 s, avg_samples: 16.0, ips: 29.86095 samples/s, "
        "eta: 2 days, 20:01:28, max_mem_reserved: 11326 MB\n")


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def overhead(build):
    demo = [str(build / "demo-train"), "--epochs", "10", "--steps-per-epoch", "800", "--log-interval", "10"]
    alone, under = [], []
    for _ in range(5):
        alone.append(timed(demo))
        under.append(timed([str(build / "trainwatch"), "run", "--web.listen-address", "none", "--"] + demo))
    a, u = statistics.median(alone), statistics.median(under)
    print(f"overhead: demo-train alone {a:.3f} s, under trainwatch run {u:.3f} s: {100 * (u - a) / a:+.2f}% (median of 5, interleaved)")


def own_usage(pid):
    """CPU seconds and peak RSS (KiB) of a live process, from /proc."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:"))
    return cpu, hwm


def cpu_per_rate(build, work, rate=10000, seconds=6):
    log = work / "rate.log"
    log.write_text("")
    watcher = subprocess.Popen([str(build / "trainwatch"), "watch", "--web.listen-address", "none", str(log)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    start = time.perf_counter()
    n = 0
    with open(log, "a") as f:
        while time.perf_counter() - start < seconds:
            batch = rate // 100
            f.write("".join(LINE.format(n=n + i) for i in range(batch)))
            f.flush()
            n += batch
            time.sleep(max(0, start + n / rate - time.perf_counter()))
    time.sleep(0.5)
    cpu, _ = own_usage(watcher.pid)
    watcher.terminate()
    watcher.wait()
    wall = seconds + 1.0
    print(f"cpu: {rate} lines/s for {seconds} s cost trainwatch watch {cpu:.2f} CPU s: "
          f"{100 * cpu / wall / (rate / 1000):.2f}% of a core per 1,000 lines/s")


def memory(build, work, gigabytes):
    log = work / "big.log"
    chunk = work / "chunk"
    with open(chunk, "w") as f:
        f.write("".join(LINE.format(n=i) for i in range(1 << 20 // 1)))  # ~300 MB
    chunk_size = chunk.stat().st_size
    per_gb = max(1, (1 << 30) // chunk_size)
    log.write_text("")
    watcher = subprocess.Popen([str(build / "trainwatch"), "watch", "--web.listen-address", "none", str(log)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    written = 0
    for gb in range(gigabytes):
        with open(log, "ab") as out, open(chunk, "rb") as src:
            for _ in range(per_gb):
                src.seek(0)
                shutil.copyfileobj(src, out, 1 << 20)
                written += chunk_size
        time.sleep(0.2)
        os.replace(log, work / "big.log.1")  # rotate by rename; the watcher finishes the old file
        log.write_text("")
    time.sleep(5)
    _, rss = own_usage(watcher.pid)
    watcher.terminate()
    watcher.wait()
    print(f"memory: trainwatch watch peak RSS {rss / 1024:.1f} MiB after following {written / 2**30:.1f} GiB")


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    gigabytes = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    work = pathlib.Path(tempfile.mkdtemp(prefix="tw-supervise-"))
    try:
        overhead(build)
        cpu_per_rate(build, work)
        memory(build, work, gigabytes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
