#!/usr/bin/env python3
"""bench/ingest.py: how fast `trainwatch analyze` reads a large training log,
against what a user would otherwise run on the same file in the same session:
wc -l and grep -c (the floor), plain Python `re` scripts (one pulling ten
fields with one pattern, one finding the same records trainwatch does), and
mtail (Debian package) with an equivalent program.

Usage: bench/ingest.py BUILD_DIR [SIZE_MB]   (default 1024 MB)
Prints MB/s, ratios and peak RSS for each; nothing here is a test.
trainwatch is timed twice: with its default (one thread per core reading
the file in blocks) and with --jobs 1 (one core, like every peer here).
"""
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def make_log(path, size_mb):
    """A mixed Paddle-style log: PaddleOCR, PaddleDetection and hapi step lines,
    evaluation lines, glog chatter, warnings and an occasional traceback."""
    rng = random.Random(42)
    lines = []
    step = 0
    for i in range(20000):
        step += 10
        r = rng.random()
        loss = 2.0 / (1 + step / 5000) + rng.random() * 0.05
        if r < 0.55:
            lines.append(f"[2024/03/09 15:{(i // 60) % 60:02d}:{i % 60:02d}] ppocr INFO: epoch: [{1 + step // 10000}/500], "
                         f"global_step: {step}, lr: 0.001000, loss: {loss:.6f}, loss_text: {loss / 3:.6f}, "
                         f"avg_reader_cost: {rng.random() * 0.1:.5f} s, avg_batch_cost: {0.5 + rng.random() * 0.1:.5f} s, "
                         f"avg_samples: 16.0, ips: {30 + rng.random():.5f} samples/s, eta: 2 days, 20:01:28, "
                         f"max_mem_reserved: 11326 MB, max_mem_allocated: 10599 MB\n")
        elif r < 0.75:
            lines.append(f"[08/02 02:{(i // 60) % 60:02d}:{i % 60:02d}] ppdet.engine INFO: Epoch: [{step // 4640}] "
                         f"[{(step // 10) % 464:3d}/464] learning_rate: 0.000100 loss_class: 0.171225 "
                         f"loss_bbox: 0.749131 loss: {loss * 10:.6f} eta: 4:07:18 batch_cost: 0.4416 "
                         f"data_cost: 0.0002 ips: 4.5291 images/s\n")
        elif r < 0.85:
            lines.append(f"step {step % 938:3d}/938 - loss: {loss:.4f} - acc: 0.9123 - 12ms/step\n")
        elif r < 0.93:
            lines.append(f"I0309 15:15:33.293759 12345 nccl_context.cc:189] init nccl context nranks: 8 rank: {i % 8}\n")
        elif r < 0.97:
            lines.append("/usr/lib/python3.8/site-packages/paddle/nn/layer/norm.py:654: UserWarning: "
                         "When training, we now always track global mean and variance.\n")
        elif r < 0.99:
            lines.append(f"[2024/03/09 15:15:33] ppocr INFO: cur metric, precision: 0.8{i % 10}, recall: 0.7, hmean: 0.75, fps: 12.3\n")
        else:
            lines.append("Traceback (most recent call last):\n  File \"tools/train.py\", line 10, in <module>\n"
                         "    main()\nValueError: bad sample in batch\n")
    chunk = "".join(lines).encode()
    target = size_mb * 1024 * 1024
    with open(path, "wb") as f:
        written = 0
        while written < target:
            f.write(chunk)
            written += len(chunk)
    return written


PYTHON_SCRIPT = r'''
import re, sys
pat = re.compile(r"(loss|lr|learning_rate|avg_reader_cost|reader_cost|data_cost|avg_batch_cost|batch_cost|ips|global_step|iter): \[?([-+0-9.eE]+|nan|inf)")
steps = 0; total = 0.0
with open(sys.argv[1], "rb") as f:
    for raw in f:
        line = raw.decode("utf-8", "replace")
        fields = dict(pat.findall(line))
        if "loss" in fields:
            steps += 1
            total += float(fields["loss"])
print(steps, total)
'''

# The same records trainwatch finds in this log (its step, eval and event
# counts agree with `trainwatch analyze --json`): every numeric key: value
# pair as a float, the leading timestamp, tracebacks and warnings.
PYTHON_FULL_SCRIPT = r'''
import re, sys, calendar
# every numeric key: value / key=value pair as a float, the leading timestamp,
# tracebacks with their last line, and warnings: what analyze reads from a line
kv = re.compile(r"([A-Za-z_][\w./()@-]*)\s?[:=]\s*\[?\s*([-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|nan|inf)")
stamp = re.compile(r"^\[?(\d{4})[/-](\d\d)[/-](\d\d)[ T](\d\d):(\d\d):(\d\d(?:\.\d+)?)")
steps = evals = events = 0; total = 0.0; last = {}; in_tb = False; t = None
with open(sys.argv[1], "rb") as f:
    for raw in f:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        m = stamp.match(line)
        if m:
            y, mo, d, h, mi, s = m.groups()
            t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), 0)) + float(s)
        if in_tb:
            if line.startswith(" "):
                continue
            in_tb = False; events += 1
            continue
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True; continue
        if "Warning" in line or "WARNING" in line:
            events += 1; continue
        fields = {}
        for k, v in kv.findall(line):
            try:
                fields[k] = float(v.replace(",", ""))
            except ValueError:
                pass
        if "loss" in fields and ("global_step" in fields or "step" in fields or "iter" in fields or "lr" in fields or "learning_rate" in fields or "ms/step" in line):
            steps += 1; total += fields["loss"]; last.update(fields)
        elif fields and ("metric" in line or "eval" in line.lower()):
            evals += 1
print(steps, evals, events, total, len(last))
'''

MTAIL_PROG = r'''
counter train_steps
gauge train_loss
gauge reader_cost
gauge batch_cost
/loss: (?P<loss>[-+0-9.eE]+)/ {
  train_steps++
  train_loss = float($loss)
}
/(avg_)?reader_cost: (?P<r>[0-9.]+)/ {
  reader_cost = float($r)
}
/(avg_)?batch_cost: (?P<b>[0-9.]+)/ {
  batch_cost = float($b)
}
'''


PATTERN = (r"global_step: (?<global_step>\d+), lr: [0-9.]+, loss: (?<loss>[-+0-9.eE]+), .*"
           r"avg_reader_cost: (?<data_time>[0-9.]+) s, avg_batch_cost: (?<step_time>[0-9.]+)")


def measure(name, cmd, size):
    """Runs cmd under /usr/bin/time (a small parent, so the child's peak RSS
    is its own, not inherited from this Python), returns (seconds, MiB)."""
    start = time.perf_counter()
    # stdout to a real file: GNU grep stops at the first match when it sees /dev/null
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=sink,
                              stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    code = proc.returncode
    rss = int(proc.stderr.strip().splitlines()[-1]) / 1024
    print(f"  {name:<28} {elapsed:8.2f} s  {size / elapsed / 1e6:9.1f} MB/s  {rss:8.1f} MiB peak RSS  (exit {code})",
          flush=True)
    return elapsed, rss


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    size_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    trainwatch = str(build / "trainwatch")
    work = pathlib.Path(tempfile.mkdtemp(prefix="tw-bench-"))
    try:
        log = work / "train.log"
        size = make_log(log, size_mb)
        small = work / "small.log"
        make_log(small, max(1, size_mb // 10))
        (work / "extract.py").write_text(PYTHON_SCRIPT)
        (work / "records.py").write_text(PYTHON_FULL_SCRIPT)
        (work / "progs").mkdir()
        (work / "progs" / "train.mtail").write_text(MTAIL_PROG)
        print(f"ingest benchmark: {size / 1e6:.0f} MB mixed Paddle-style log, {os.cpu_count()} cores")
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL)  # warm the page cache
        results = {}
        results["wc"] = measure("wc -l", ["wc", "-l", str(log)], size)
        results["grep"] = measure("grep -c loss", ["grep", "-c", "loss", str(log)], size)
        results["trainwatch"] = measure(f"trainwatch analyze ({os.cpu_count()} jobs)",
                                        [trainwatch, "analyze", "--no-color", str(log)], size)
        results["trainwatch1"] = measure("trainwatch analyze --jobs 1",
                                         [trainwatch, "analyze", "--no-color", "--jobs", "1", str(log)], size)
        # the mtail program's fields, as one --pattern (the user-format path)
        results["pattern1"] = measure("trainwatch --pattern, --jobs 1",
                                      [trainwatch, "analyze", "--no-color", "--jobs", "1", "--pattern", PATTERN, str(log)],
                                      size)
        results["python"] = measure("python3 re, 10 fields", ["/usr/bin/python3", str(work / "extract.py"), str(log)], size)
        results["python_full"] = measure("python3 re, same records",
                                         ["/usr/bin/python3", str(work / "records.py"), str(log)], size)
        if shutil.which("mtail"):
            results["mtail"] = measure("mtail --one_shot", ["mtail", "--one_shot", "--one_shot_format=prometheus",
                                                            "--progs", str(work / "progs"), "--logs", str(log),
                                                            "--logtostderr"], size)
        small_size = small.stat().st_size
        small_res = measure("trainwatch analyze (1/10 size)", [trainwatch, "analyze", "--no-color", str(small)], small_size)
        tw, tw1 = results["trainwatch"][0], results["trainwatch1"][0]
        print("ratios (time of the other / time of trainwatch; above 1 means trainwatch is faster):")
        print(f"  {'':<13} {'all cores':>9} {'one core':>9}")
        for key, label in [("wc", "wc -l"), ("grep", "grep -c"), ("python", "python 10"), ("python_full", "python all"),
                           ("mtail", "mtail"), ("pattern1", "--pattern")]:
            if key in results:
                print(f"  vs {label:<10} {results[key][0] / tw:8.2f}x {results[key][0] / tw1:8.2f}x")
        print(f"memory: {small_res[1]:.1f} MiB at {small_size / 1e6:.0f} MB, {results['trainwatch'][1]:.1f} MiB "
              f"at {size / 1e6:.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
