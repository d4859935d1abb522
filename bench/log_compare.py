"""bench/log_compare.py BUILD: ns per log call of libtrainwatch logging against
spdlog (sync rotating, async) and Python logging with RotatingFileHandler,
in one run, as ratios. Every logger writes the same record ("Step step=N
loss=2.134") through a rotating file of 10 MB x 5 in a temporary
directory. "ns per call" is the wall time of the logging threads divided
by the calls of one thread (so with two threads it is the time each call
costs its thread while the other logs too). Each figure is the best of
TW_BENCH_ROUNDS (5) rounds that interleave all the loggers."""
import logging
import logging.handlers
import os
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
here = os.path.dirname(os.path.abspath(__file__))
COUNT = int(os.environ.get("TW_BENCH_COUNT", "1000000"))
ROUNDS = int(os.environ.get("TW_BENCH_ROUNDS", "5"))


def ns(cmd):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(cmd + [d], capture_output=True, text=True, check=True).stdout
    return float(out.split()[1])


def spdlog_binary():
    exe = os.path.join(build, "log-spdlog")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "spdlog"], capture_output=True, text=True)
    if flags.returncode != 0:
        return None
    if not os.path.exists(exe):
        subprocess.run(["g++", "-O2", "-std=c++17", os.path.join(here, "log_spdlog.cpp"), "-o", exe,
                        *flags.stdout.split()], check=True)
    return exe


def python_ns(count):
    with tempfile.TemporaryDirectory() as d:
        handler = logging.handlers.RotatingFileHandler(os.path.join(d, "py.log"), maxBytes=10_000_000, backupCount=5)
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(funcName)s:%(lineno)d | "
                                               "%(message)s"))
        log = logging.getLogger("bench")
        log.propagate = False
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        start = time.perf_counter()
        for i in range(count):
            log.info("Step step=%d loss=%s", i, 2.134)
        elapsed = time.perf_counter() - start
        handler.close()
    return elapsed * 1e9 / count


bench = os.path.join(build, "bench-log")
sp = spdlog_binary()
configs = {}
for threads in (1, 2):
    for mode in ("text", "json", "async-text", "async-json"):
        configs[f"trainwatch {mode} x{threads}"] = lambda m=mode, t=threads: ns([bench, m, str(t), str(COUNT)])
configs["trainwatch disabled x1"] = lambda: ns([bench, "disabled", "1", str(COUNT * 10)])
if sp:
    for threads in (1, 2):
        for mode in ("sync", "async"):
            configs[f"spdlog {mode} x{threads}"] = lambda m=mode, t=threads: ns([sp, m, str(t), str(COUNT)])
configs["python logging x1"] = lambda: python_ns(min(COUNT, 200000))

# Rounds interleave every configuration, trainwatch's and its peers', and
# each keeps its best round: on a shared machine the other load only ever
# adds time, to whichever run it happens to meet.
results = {}
for _ in range(ROUNDS):
    for name, measure in configs.items():
        value = measure()
        results[name] = min(value, results.get(name, value))
print(f"best of {ROUNDS} interleaved rounds, {COUNT} calls per run")
for name, value in results.items():
    print(f"{name:28s} {value:10.2f} ns/call")
print()
py = results["python logging x1"]
for threads in (1, 2):
    if sp:
        print(f"x{threads}: trainwatch text sync / spdlog sync    = "
              f"{results[f'trainwatch text x{threads}'] / results[f'spdlog sync x{threads}']:.2f}")
        print(f"x{threads}: trainwatch text async / spdlog async  = "
              f"{results[f'trainwatch async-text x{threads}'] / results[f'spdlog async x{threads}']:.2f}")
print(f"python logging / trainwatch text sync   = {py / results['trainwatch text x1']:.1f}x")
print(f"python logging / trainwatch async text  = {py / results['trainwatch async-text x1']:.1f}x")
print(f"disabled call                           = {results['trainwatch disabled x1']:.2f} ns")
