"""bench/python.py BUILD: the trainwatch Python package against
prometheus_client and the logging module, in one run (docs/python.md):
ns per Gauge.set, Counter.inc, Histogram.observe, .labels(...) lookup of an
existing child, and per logger.info to a 10 MB x 5 rotating file (logging's
RotatingFileHandler, trainwatch.Handler on a plain logging.Logger, the logger
setup_logger returns, and the direct trainwatch logger). Each figure is the
best of 5 runs of N calls in one thread, the runs interleaved; ratios are the
other library's time over ours (two decimals for logging, whose targets
are met by small margins). Last, the control channel's step-boundary poll
(`trainwatch run`'s TRAINWATCH_CONTROL, nothing pending) and what the hooks
pay without it (one attribute check)."""
import logging
import logging.handlers
import os
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
sys.path.insert(0, os.path.join(build, "python"))

import prometheus_client  # noqa: E402

import trainwatch  # noqa: E402

N = int(os.environ.get("TW_BENCH_COUNT", "1000000"))
LOG_N = max(N // 10, 1000)


def _version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "?"


def best_ns(fns, n, repeat=5):
    """The best ns per call of each function, the runs interleaved (one
    round runs each once) so that load from elsewhere falls on all alike."""
    best = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter_ns()
            fn(n)
            t = (time.perf_counter_ns() - t0) / n
            best[i] = t if best[i] is None or t < best[i] else best[i]
    return best


def metric_loops(mod, registry):
    g = mod.Gauge("bench_gauge", "g", registry=registry)
    c = mod.Counter("bench_counter", "c", registry=registry)
    h = mod.Histogram("bench_hist", "h", registry=registry)
    lab = mod.Counter("bench_labelled", "l", ["rank", "kind"], registry=registry)
    lab.labels("0", "train").inc()

    def gauge_set(n):
        s = g.set
        for i in range(n):
            s(1.5)

    def counter_inc(n):
        f = c.inc
        for i in range(n):
            f()

    def hist_observe(n):
        f = h.observe
        for i in range(n):
            f(0.2)

    def labels_lookup(n):
        f = lab.labels
        for i in range(n):
            f("0", "train")

    return [("Gauge.set", gauge_set, N), ("Counter.inc", counter_inc, N), ("Histogram.observe", hist_observe, N),
            (".labels(a, b) lookup", labels_lookup, N)]


def log_loops(d):
    fmt = "%(asctime)s | %(levelname)s | %(name)s | %(funcName)s:%(lineno)d | %(message)s"
    py = logging.getLogger("bench.python")
    py.propagate = False
    py.setLevel(logging.INFO)
    rh = logging.handlers.RotatingFileHandler(os.path.join(d, "py.log"), maxBytes=10_000_000, backupCount=5)
    rh.setFormatter(logging.Formatter(fmt))
    py.addHandler(rh)
    tw = logging.getLogger("bench.trainwatch")
    tw.propagate = False
    tw.setLevel(logging.INFO)
    handler = trainwatch.Handler(file=os.path.join(d, "tw.log"), max_bytes=10_000_000, backup_count=5)
    tw.addHandler(handler)
    fast = handler.fast_logger("bench.direct")
    setup = trainwatch.setup_logger("bench.setup", log_file=os.path.join(d, "setup.log"), max_bytes=10_000_000,
                                    backup_count=5, console_level=None)
    buffered = trainwatch.Handler(file=os.path.join(d, "tw-buffered.log"), max_bytes=10_000_000, backup_count=5,
                                  flush_level="WARNING").fast_logger("bench.buffered")

    def python_logging(n):
        f = py.info
        for i in range(n):
            f("Step %d loss=%s", i, 2.134)

    def trainwatch_handler(n):
        f = tw.info
        for i in range(n):
            f("Step %d loss=%s", i, 2.134)

    def trainwatch_setup_logger(n):
        f = setup.info
        for i in range(n):
            f("Step %d loss=%s", i, 2.134)

    def trainwatch_direct(n):
        f = fast.info
        for i in range(n):
            f("Step", step=i, loss=2.134)

    def trainwatch_buffered(n):
        f = buffered.info
        for i in range(n):
            f("Step", step=i, loss=2.134)

    return python_logging, trainwatch_handler, trainwatch_setup_logger, trainwatch_direct, trainwatch_buffered


def control_loops(d):
    """The poll at each step boundary with nothing pending: the native call
    (one fstat), Control.poll, StepRecorder.record with the channel on and
    off, and the attribute check the hooks make without it."""
    path = os.path.join(d, "requests")
    open(path, "w").close()
    trainwatch._native.control_open(path)
    ctl = trainwatch.Control(path)
    off = trainwatch.StepRecorder(None, log_freq=1 << 30, metrics=False)
    on = trainwatch.StepRecorder(None, log_freq=1 << 30, metrics=False)
    on._control = ctl
    native = trainwatch._native.control_poll

    def native_poll(n):
        for i in range(n):
            native()

    def control_poll(n):
        f = ctl.poll
        for i in range(n):
            f(i)

    def record_off(n):
        f = off.record
        for i in range(n):
            f(0.1, 0.01)

    def record_on(n):
        f = on.record
        for i in range(n):
            f(0.1, 0.01)

    def check(n):
        r = off
        for i in range(n):
            if r._control is not None:
                pass

    def empty(n):
        for i in range(n):
            pass

    return native_poll, control_poll, record_off, record_on, check, empty


def main():
    print(f"Python {sys.version.split()[0]}, prometheus_client {_version('prometheus_client')}, {os.cpu_count()} cores; "
          f"ns per call, best of 5 x {N} (logging: x {LOG_N})")
    ours = metric_loops(trainwatch, trainwatch.CollectorRegistry())
    theirs = metric_loops(prometheus_client, prometheus_client.CollectorRegistry())
    print(f"  {'operation':24} {'trainwatch':>11} {'prometheus_client':>18} {'ratio':>8}")
    for (name, fo, n), (_, ft, _) in zip(ours, theirs):
        a, b = best_ns([fo, ft], n)
        print(f"  {name:24} {a:11.1f} {b:18.1f} {b / a:7.1f}x")
    with tempfile.TemporaryDirectory() as d:
        py, handler, setup, direct, buffered = log_loops(d)
        p, h, s, f, b = best_ns([py, handler, setup, direct, buffered], LOG_N)
    print(f"  {'logger.info, 10 MB x 5':24} {'ns':>11} {'vs logging':>18}")
    print(f"  {'logging + Rotating...':24} {p:11.1f} {'1.00x':>18}")
    print(f"  {'logging + tw.Handler':24} {h:11.1f} {p / h:17.2f}x   (any logging.Logger)")
    print(f"  {'setup_logger().info':24} {s:11.1f} {p / s:17.2f}x   (trainwatch.Logger + tw.Handler)")
    print(f"  {'trainwatch direct':24} {f:11.1f} {p / f:17.2f}x")
    print(f"  {'direct, INFO buffered':24} {b:11.1f} {p / b:17.2f}x   (flush_level=WARNING)")
    with tempfile.TemporaryDirectory() as d:
        fns = control_loops(d)
        native, poll, off, on, check, empty = best_ns(fns, N // 4)
    print(f"  {'control channel, step boundary':32} {'ns':>11}")
    print(f"  {'_native.control_poll()':32} {native:11.1f}   (nothing pending: one fstat)")
    print(f"  {'Control.poll(step)':32} {poll:11.1f}   (TRAINWATCH_CONTROL set, nothing pending)")
    print(f"  {'StepRecorder.record, channel on':32} {on:11.1f}   (+{on - off:.1f} over off)")
    print(f"  {'StepRecorder.record, channel off':32} {off:11.1f}")
    print(f"  {'without TRAINWATCH_CONTROL':32} {max(check - empty, 0.0):11.1f}   (the hooks' one attribute check)")


if __name__ == "__main__":
    main()
