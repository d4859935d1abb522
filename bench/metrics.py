#!/usr/bin/env python3
"""bench/metrics.py: libtrainwatch's metrics against python3-prometheus-client
(what a training script would use instead), in the same run on the same
machine: nanoseconds per update on one and two threads, time to expose 100 /
1,000 / 10,000 series, and /metrics scrapes per second under wrk with 1,000
series. Prints the figures and the ratios. Not a test.

Usage: bench/metrics.py BUILD_DIR
"""
import importlib.metadata
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import time
import timeit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_update_ns():
    reg = CollectorRegistry()
    c, g, h = Counter("c", "c", registry=reg), Gauge("g", "g", registry=reg), Histogram("h", "h", registry=reg)
    ops = {"counter_inc": c.inc, "gauge_set": lambda: g.set(1.5), "histogram_observe": lambda: h.observe(0.3)}
    out = {}
    n = 300000
    for name, fn in ops.items():
        out[(name, 1)] = timeit.timeit(fn, number=n) * 1e9 / n
        # two threads on the same series; the GIL serialises them
        def worker():
            for _ in range(n):
                fn()
        start = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out[(name, 2)] = (time.perf_counter() - start) * 1e9 / n
    return out


def python_expose_ms(series):
    reg = CollectorRegistry()
    g = Gauge("series", "x", ["index"], registry=reg)
    for i in range(series):
        g.labels(str(i)).set(i * 0.5)
    reps = max(3, 20000 // series)
    return timeit.timeit(lambda: generate_latest(reg), number=reps) * 1e3 / reps


def wrk(url, seconds=5):
    out = subprocess.run(["wrk", "-t1", "-c4", f"-d{seconds}s", url], capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    return float(m.group(1)) if m else 0.0


PY_SERVER = r'''
import sys, time
from prometheus_client import Gauge, start_http_server, REGISTRY
g = Gauge("demo_series", "x", ["index"])
for i in range(1000):
    g.labels(str(i)).set(i * 0.5)
start_http_server(int(sys.argv[1]), addr="127.0.0.1")
time.sleep(3600)
'''


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    c_rows = [json.loads(l) for l in subprocess.run([str(build / "bench-metrics")], capture_output=True,
                                                       text=True, check=True).stdout.splitlines()]
    py_updates = python_update_ns()
    version = importlib.metadata.version("prometheus_client")
    print(f"metrics benchmark against python3-prometheus-client {version}, {os.cpu_count()} cores")
    print("updates (ns per operation per thread):")
    for row in c_rows:
        if row["op"] == "expose":
            continue
        py = py_updates[(row["op"], row["threads"])]
        print(f"  {row['op']:<18} {row['threads']} thread(s)  trainwatch {row['ns']:8.2f}  python {py:9.1f}  ratio {py / row['ns']:8.1f}x")
    print("exposition (ms per /metrics body):")
    for row in c_rows:
        if row["op"] != "expose":
            continue
        py = python_expose_ms(row["series"])
        print(f"  {row['series']:>6} series  trainwatch {row['ms']:8.3f}  python {py:9.3f}  ratio {py / row['ms']:8.1f}x")
    tw_port, py_port = free_port(), free_port()
    tw = subprocess.Popen([str(build / "metrics-demo"), f"--web.listen-address=127.0.0.1:{tw_port}", "--set", "b",
                           "--series", "1000"], stdout=subprocess.DEVNULL)
    py = subprocess.Popen(["/usr/bin/python3", "-c", PY_SERVER, str(py_port)], stdout=subprocess.DEVNULL)
    try:
        wait_port(tw_port)
        wait_port(py_port)
        tw_rps = wrk(f"http://127.0.0.1:{tw_port}/metrics")
        py_rps = wrk(f"http://127.0.0.1:{py_port}/metrics")
        print(f"scrapes/s with 1,000 series (wrk -t1 -c4 -d5s): trainwatch {tw_rps:.0f}  python {py_rps:.0f}  "
              f"ratio {tw_rps / py_rps if py_rps else float('inf'):.1f}x")
    finally:
        tw.terminate()
        py.terminate()
        tw.wait()
        py.wait()


if __name__ == "__main__":
    main()
