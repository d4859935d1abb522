#!/usr/bin/env python3
"""bench/history.py: what the run history costs.

Writes a PaddleOCR-style log of STEPS steps (default 2,000,000: about
0.5 GB), then times, on this machine and in this one run:
  - `trainwatch analyze` with --no-history against the same with a history
    file (the recording: a SQLite transaction of one run, its findings,
    facts and series cut to 600 points each, plus the baseline query), each
    the median of REPEAT runs; the difference is what recording adds;
  - `trainwatch compare ID ID` of two recorded runs of that log (reading
    two runs' rows and series back and comparing them), median of REPEAT;
  - `trainwatch runs` over a history of 1,000 runs.
`run` records once, at the end, from the same bounded series: nothing is
done per line. Prints one table. Usage: bench/history.py BUILD_DIR [STEPS]
[REPEAT]. Not a test: no timing is asserted anywhere.
"""
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

LINE = ("[2026/12/06 10:{m:02d}:{s:02d}] ppocr INFO: epoch: [1/1], global_step: {n}, lr: 0.001000, loss: {loss:.5f}, "
        "avg_reader_cost: 0.01036 s, avg_batch_cost: 0.53538 s, avg_samples: 16.0, ips: 29.86095 samples/s, "
        "eta: 0:00:00, max_mem_reserved: 1200 MB\n")


def write_log(path, steps):
    with open(path, "w") as f:
        for n in range(1, steps + 1):
            f.write(LINE.format(m=n // 60 % 60, s=n % 60, n=n, loss=3 / (1 + n * 1e-4) + 0.01 * (n % 7)))


def timed(args, env):
    start = time.perf_counter()
    r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    took = time.perf_counter() - start
    if r.returncode not in (0, 1):
        sys.exit(f"{args}: exit {r.returncode}: {r.stderr}")
    return took


def median_of(args, env, repeat):
    return statistics.median(timed(args, env) for _ in range(repeat))


def main():
    build = pathlib.Path(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    tw = str(build / "trainwatch")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        log = tmp / "train.log"
        write_log(log, steps)
        db = tmp / "runs.db"
        env = dict(os.environ, XDG_DATA_HOME=str(tmp / "unused"))
        size = log.stat().st_size
        timed([tw, "analyze", "--quiet", "--history", db, log], env)  # warm the page cache and the file
        plain = median_of([tw, "analyze", "--quiet", "--no-history", log], env, repeat)
        recorded = median_of([tw, "analyze", "--quiet", "--history", db, log], env, repeat)
        compare = median_of([tw, "compare", "--history", db, "1", "2"], env, repeat)
        big = tmp / "many.db"
        small = tmp / "small.log"
        write_log(small, 200)
        for _ in range(1000 if steps >= 1000 else 10):
            subprocess.run([tw, "analyze", "--quiet", "--history", big, small], stdout=subprocess.DEVNULL, env=env)
        listing = median_of([tw, "runs", "--history", big], env, repeat)
        print(f"log: {steps} steps, {size / 1e6:.0f} MB; medians of {repeat} runs; {os.cpu_count()} cores")
        print("| what | time |")
        print("|---|---|")
        print(f"| analyze --no-history | {plain * 1000:.0f} ms |")
        print(f"| analyze, recorded in the history | {recorded * 1000:.0f} ms |")
        print(f"| what recording adds | {(recorded - plain) * 1000:+.1f} ms |")
        print(f"| compare of two recorded runs of that log | {compare * 1000:.1f} ms |")
        print(f"| runs over a history of 1,000 runs | {listing * 1000:.1f} ms |")
        print(f"| history file after {repeat + 1} runs of that log | {db.stat().st_size / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
