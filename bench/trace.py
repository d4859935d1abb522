#!/usr/bin/env python3
"""bench/trace.py: how fast and in how much memory `trainwatch trace` reads a
large profiler trace, against what a user would otherwise run on the same
file in the same session: a Python script with the `json` module computing
the same per-step breakdown (tests/e2e/trace_reference.py, the test's
independent reference) and `jq` summing the kernel time.

Usage: bench/trace.py BUILD_DIR [SIZE_MB] [--keep=DIR] [--baseline=TRAINWATCH]
(default 1024 MB; --baseline times another trainwatch binary, say one built
from main, on the same trace in the same run and says whether its output is
the same)

The trace is generated into a temporary directory (never committed) in the
current Kineto schema and order: the host events (ProfilerStep#N and
DataLoader annotations, nested cpu_ops with the input dims and types that
record_shapes=True writes) of every step first, then the
device side (runtime launches, kernels on a compute stream with each
layer's launch grid and occupancy, an NCCL
all-reduce on a second stream overlapping the backward kernels, a pinned or
pageable HtoD copy, a stream synchronisation, ac2g flow events), as Kineto
writes them. Every step has the same shape with varied durations, so the
figures of trainwatch and the reference can be compared to the microsecond:
the bench says whether they agree (per-step figures, kernel totals) and
how many intervals went past the sets' bound (the watermark flushes).
trainwatch (and a baseline) and the Python script run ROUNDS times each, the
round with the least CPU time counting. Then the real traces of
../shared/corpus/traces, small ones, trainwatch against the Python script on
each. Prints MB/s, ratios and peak RSS; nothing here is a test.
"""
import gzip
import json
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REFERENCE = HERE.parent / "tests" / "e2e" / "trace_reference.py"

PID, TID = 2910249, 2919752
ROUNDS = 3
KERNELS = [
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int, "
    "float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >"
    "(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*, "
    "cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
    "ampere_sgemm_128x64_nn",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, "
    "int, int, int, int, int, int, int, int, int, int, float*, long*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>(at::TensorIteratorBase&, "
    "float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, float, at::detail::Array<char*, 3>)",
]
OPS = [("aten::conv2d", "aten::convolution"), ("aten::add_", None), ("aten::batch_norm", "aten::_batch_norm_impl_index"),
       ("aten::linear", "aten::addmm"), ("aten::max_pool2d", "aten::max_pool2d_with_indices"),
       ("aten::relu_", "aten::clamp_min_")]
OPS_PER_STEP = 160
# what record_shapes=True writes on an operator, by layer: its inputs' dims
# and types, and the launch grid of the layer's kernel (they change from one
# layer to the next, as in a real network)
DIMS = ["[[32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []]", "[[32, 256, 14, 14], [32, 256, 14, 14], []]",
        "[[32, 128, 28, 28], [128], [128], [128], [128], [], [], [], []]", "[[32, 2048], [1000, 2048], [1000]]",
        "[[32, 64, 112, 112], [], [], [], [], []]", "[[32, 512, 7, 7]]"]
TYPES = ['["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]',
         '["float", "float", "Scalar"]', '["float", "float", "float", "float", "float", "Scalar", "Scalar", "Scalar", "Scalar"]',
         '["float", "float", "float"]', '["float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"]',
         '["float"]']
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def step_plan(n):
    """The timeline of step n: every time and duration, from a per-step RNG, so
    the host and device passes agree without holding anything."""
    rng = random.Random(n)
    start = 1_000_000 + n * 60_000
    data = rng.choice((200, 400, 3000, 12000))  # some steps wait for data
    ops = []
    t = start + data + 50
    g = t + 30  # the GPU lags the host a little
    for i in range(OPS_PER_STEP):
        k = rng.randrange(len(OPS))
        dur = 20 + rng.randrange(30)
        kdur = rng.choice((3, 8, 40, 90, 150)) + rng.random()
        g = max(g, t + 12) + rng.choice((0, 0, 1, 4, 30))
        ops.append((k, t, dur, g, kdur))
        g += kdur
        t += dur + 2
    end = max(t, g) + 300
    return start, end, data, ops


def host_events(n, out):
    start, end, data, ops = step_plan(n)
    ext = n * 1000
    out.append(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{n}", "pid": {PID}, "tid": {TID}, '
               f'"ts": {start}, "dur": {end - start}, "args": {{"External id": {ext}}}}}')
    out.append(f'{{"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.'
               f'__next__", "pid": {PID}, "tid": {TID}, "ts": {start + 5}, "dur": {data}, "args": {{"External id": '
               f'{ext + 1}}}}}')
    for i, (k, t, dur, _, _) in enumerate(ops):
        parent, child = OPS[k]
        e = ext + 2 + 2 * i
        out.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{parent}", "pid": {PID}, "tid": {TID}, "ts": {t}, '
                   f'"dur": {dur}, "args": {{"External id": {e}, "Sequence number": {e}, "Fwd thread id": 0, '
                   f'"Record function id": 0, "Input Dims": {DIMS[(k + i) % len(DIMS)]}, '
                   f'"Input type": {TYPES[(k + i) % len(TYPES)]}, "Ev Idx": {e}}}}}')
        if child:
            out.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{child}", "pid": {PID}, "tid": {TID}, "ts": {t + 2}, '
                       f'"dur": {dur - 4}, "args": {{"External id": {e + 1}, "Ev Idx": {e + 1}}}}}')


def device_events(n, out):
    start, end, data, ops = step_plan(n)
    ext = n * 1000
    corr = n * 1000
    # the batch copied in: pinned on even steps, pageable on odd ones
    kind = "Pageable" if n % 2 else "Pinned"
    cts = start + data + 10
    out.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": {PID}, "tid": {TID}, '
               f'"ts": {cts}, "dur": 8, "args": {{"External id": {ext + 1}, "cbid": 41, "correlation": {corr}}}}}')
    out.append(f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD ({kind} -> Device)", "pid": 0, "tid": 7, '
               f'"ts": {cts + 5}, "dur": 30, "args": {{"External id": {ext + 1}, "device": 0, "context": 1, '
               f'"stream": 7, "correlation": {corr}, "bytes": 602112, "memory bandwidth (GB/s)": 20.07}}}}')
    for i, (k, t, dur, g, kdur) in enumerate(ops):
        c = corr + 1 + i
        grid = 64 << ((k + i) % 6)  # the layer's launch grid
        e = ext + 3 + 2 * i if OPS[k][1] else ext + 2 + 2 * i
        out.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, "tid": {TID}, '
                   f'"ts": {t + 4}, "dur": 6, "args": {{"External id": {e}, "cbid": 211, "correlation": {c}}}}}')
        out.append(f'{{"ph": "s", "id": {c}, "pid": {PID}, "tid": {TID}, "ts": {t + 4}, "cat": "ac2g", "name": "ac2g"}}')
        out.append(f'{{"ph": "X", "cat": "kernel", "name": "{KERNELS[k]}", "pid": 0, "tid": 7, "ts": {g:.3f}, '
                   f'"dur": {kdur:.3f}, "args": {{"External id": {e}, "queued": 0, "device": 0, "context": 1, '
                   f'"stream": 7, "correlation": {c}, "registers per thread": 32, "shared memory": 0, '
                   f'"blocks per SM": {grid / 108:.6f}, "warps per SM": {grid / 108 * 4:.6f}, '
                   f'"grid": [{grid}, {1 + i % 3}, 1], "block": [128, 1, 1], "est. achieved occupancy %": {grid % 100}}}}}')
        out.append(f'{{"ph": "f", "id": {c}, "pid": 0, "tid": 7, "ts": {g:.3f}, "cat": "ac2g", "name": "ac2g", '
                   f'"bp": "e"}}')
    # the gradients all-reduced on stream 20 while the last kernels run
    k0 = ops[OPS_PER_STEP * 3 // 4][3]
    c = corr + 900
    out.append(f'{{"ph": "X", "cat": "kernel", "name": "{NCCL}", "pid": 0, "tid": 20, "ts": {k0:.3f}, '
               f'"dur": 2500.5, "args": {{"External id": {ext + 900}, "device": 0, "context": 1, "stream": 20, '
               f'"correlation": {c}}}}}')
    sync = ops[-1][1] + ops[-1][2] + 5
    out.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": {PID}, "tid": {TID}, '
               f'"ts": {sync}, "dur": {max(1, end - 300 - sync)}, "args": {{"cbid": 131, "correlation": {c + 1}}}}}')


def make_trace(path, size_mb):
    """Writes the trace: host pass, then device pass, until size_mb is
    reached (the step count is found from one step's size). Returns (bytes,
    steps)."""
    one = []
    host_events(0, one)
    device_events(0, one)
    per_step = sum(len(x) + 2 for x in one)
    steps = max(1, size_mb * 1024 * 1024 // per_step)
    with open(path, "w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", '
                '"totalGlobalMem": 85198045184}],\n  "distributedInfo": {"backend": "nccl", "rank": 0, '
                '"world_size": 8},\n  "traceEvents": [\n')
        first = True
        for pass_ in (host_events, device_events):
            for n in range(steps):
                buf = []
                pass_(n, buf)
                f.write(("  " if first else ",\n  ") + ",\n  ".join(buf))
                first = False
        f.write('\n],\n  "traceName": "bench.pt.trace.json"\n}\n')
    return path.stat().st_size, steps


JQ_PROG = '[.traceEvents[] | select(.cat == "kernel") | .dur] | add'
JQ_STREAM_PROG = ('reduce (inputs | select(length == 2 and (.[0] | length) == 3)) as [$p, $v] ({cat: null, sum: 0}; '
                  'if $p[2] == "cat" then .cat = $v elif $p[2] == "dur" and .cat == "kernel" then .sum += $v '
                  'else . end) | .sum')


def measure(name, cmd, size, rounds=1, by="cpu"):
    """Runs cmd under /usr/bin/time (a small parent, so the peak RSS is the
    child's own) rounds times, returns the round with the least CPU time
    (other load on the shared machine only ever adds time) as (wall
    seconds, MiB, stdout, CPU seconds), the MiB being the largest of the
    rounds. The CPU time (user + system) is the fairer figure on a shared
    machine. by="wall" keeps the round with the least wall time instead (a
    run that uses every core)."""
    best, peak = None, 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        with tempfile.TemporaryFile() as sink:
            proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, stdout=sink, stderr=subprocess.PIPE,
                                  text=True)
            elapsed = time.perf_counter() - start
            sink.seek(0)
            stdout = sink.read().decode("utf-8", "replace")
        rss, user, system = proc.stderr.strip().splitlines()[-1].split()
        rss, cpu = int(rss) / 1024, float(user) + float(system)
        peak = max(peak, rss)
        if best is None or (elapsed < best[0] if by == "wall" else cpu < best[3]):
            best = (elapsed, rss, stdout, cpu, proc)
    elapsed, _, stdout, cpu, proc = best
    label = f"{name} (best of {rounds})" if rounds > 1 else name
    print(f"  {label:<44} {elapsed:7.2f} s wall {cpu:7.2f} s CPU  {size / max(cpu, 0.01) / 1e6:7.1f} MB/s (CPU)  "
          f"{peak:8.1f} MiB peak RSS  (exit {proc.returncode})", flush=True)
    if proc.returncode not in (0, 1):
        print("    " + "\n    ".join(proc.stderr.strip().splitlines()[-5:]))
    return elapsed, peak, stdout, cpu


def compare(tw, ref):
    """How far trainwatch's figures are from the reference's: the largest
    per-step difference in µs over the split, and the kernel totals."""
    rank = tw["ranks"][0]
    worst = 0.0
    keys = ("wall_us", "compute_us", "comm_us", "memcpy_us", "idle_us", "comm_total_us", "comm_overlap_us")
    if len(rank["steps"]) != len(ref["steps"]):
        return f"step counts differ: {len(rank['steps'])} vs {len(ref['steps'])}"
    for a, b in zip(rank["steps"], ref["steps"]):
        for k in keys:
            worst = max(worst, abs(a[k] - b[k]))
        worst = max(worst, abs(a["idle"]["dataloader_us"] - b["idle_dataloader_us"]))
    dk = abs(rank["kernels"]["total_us"] - ref["kernel_total_us"])
    m = ref["merged_intervals"]
    return (f"largest per-step difference {worst:.6f} us over {len(ref['steps'])} steps; kernels "
            f"{rank['kernels']['count']} vs {ref['kernel_count']}, total differs by {dk:.3f} us; merged intervals "
            f"(reference) compute {m['compute']:,}, comm {m['comm']:,}, all GPU {m['all']:,}, DataLoader "
            f"{m['data']:,} against a bound of 32768 per set: trainwatch flushed {rank['flushes']} times "
            f"({rank['flushes_forced']} forced), late intervals {rank['late']}")


def reader_bench(build, work, trace, size):
    """The JSON reader alone against yajl (bench/trace_reader.c): the same
    job (total kernel time) on the big trace, on one 256 MiB string, and on
    what paddle.profiler writes (a raw control byte in a name, a trailing
    comma)."""
    prog = build / "bench-trace-reader"
    if not prog.exists():
        print("  (bench-trace-reader not built: libyajl-dev is not installed)")
        return
    print("the JSON reader alone, total kernel time (bench-trace-reader):")
    for mode in ("yajl", "tokens", "events"):
        measure(f"{mode} on the trace", [str(prog), mode, str(trace)], size)
    huge = work / "huge.json"
    with open(huge, "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "')
        for _ in range(256):
            f.write("k" * (1 << 20))
        f.write('", "ts": 1, "dur": 2}]}')
    for mode in ("yajl", "tokens"):
        measure(f"{mode}, one 256 MiB string", [str(prog), mode, str(huge)], huge.stat().st_size)
    for label, body in (("a raw control byte", b'{"ph": "X", "cat": "Kernel", "name": "a\x01b[1.000 ms]", "ts": 1, '
                                                 b'"dur": 2}'),
                        ("a trailing comma", b'{"ph": "X", "cat": "Kernel", "name": "ab", "ts": 1, "dur": 2}, {}, ')):
        paddle = work / "paddle.json"
        paddle.write_bytes(b'{"traceEvents": [' + body + b']}')
        for mode in ("yajl", "tokens"):
            proc = subprocess.run([str(prog), mode, str(paddle)], capture_output=True, text=True)
            print(f"  {mode:<6} on {label}: " + ("read, " + proc.stdout.split()[2] if proc.returncode == 0 else
                                                   "error: " + proc.stderr.strip().splitlines()[0]))


def corpus_bench(trainwatch, work):
    """The real traces of ../shared/corpus/traces (written by PyTorch's and
    HTA's profilers, not by this generator), decompressed, each read by
    trainwatch --threads 1 and by the Python reference: CPU seconds, best of
    several rounds (they are small), and the ratio per core. Small files
    weigh trainwatch's start-up (a few milliseconds) and the Python
    interpreter's alike."""
    corpus = HERE.parent.parent / "shared" / "corpus" / "traces"
    files = sorted(corpus.glob("*.json.gz")) if corpus.is_dir() else []
    if not files:
        print(f"  (no corpus traces at {corpus}: skipped)")
        return
    print("the corpus's real traces, CPU seconds per file (trainwatch --threads 1 best of 10, Python best of 3):")
    tw_total = py_total = size_total = 0.0
    for gz in files:
        plain = work / gz.name[:-3]
        with gzip.open(gz) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        size = plain.stat().st_size
        tw = cpu_seconds([trainwatch, "trace", "--json", "--threads", "1", str(plain)], 10)
        py = cpu_seconds(["/usr/bin/python3", str(REFERENCE), str(plain)], 3)
        tw_total, py_total, size_total = tw_total + tw, py_total + py, size_total + size
        print(f"  {gz.name[:-3]:<46} {size / 1e6:6.1f} MB  trainwatch {tw * 1e3:7.1f} ms  python {py * 1e3:7.1f} ms  "
              f"{py / tw:5.1f}x")
        plain.unlink()
    print(f"  {'all together':<46} {size_total / 1e6:6.1f} MB  trainwatch {tw_total * 1e3:7.1f} ms  python "
          f"{py_total * 1e3:7.1f} ms  {py_total / tw_total:5.1f}x")


def cpu_seconds(cmd, rounds):
    """The least CPU time (user + system) of cmd over rounds runs."""
    best = float("inf")
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    keep = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--keep=")), None)
    baseline = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--baseline=")), None)
    build = pathlib.Path(args[0] if args else "build").resolve()
    size_mb = int(args[1]) if len(args) > 1 else 1024
    trainwatch = str(build / "trainwatch")
    work = pathlib.Path(keep or tempfile.mkdtemp(prefix="tw-bench-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        trace = work / "bench.pt.trace.json"
        t0 = time.perf_counter()
        size, steps = make_trace(trace, size_mb)
        small = work / "small.pt.trace.json"
        small_size, _ = make_trace(small, max(1, size_mb // 16))
        print(f"trace benchmark: {size / 1e6:.0f} MB Kineto trace, {steps} steps, generated in "
              f"{time.perf_counter() - t0:.0f} s; {os.cpu_count()} cores")
        os.sync()  # the generated gigabyte written back now, not while the tools are timed
        subprocess.run(["cat", str(trace)], stdout=subprocess.DEVNULL)  # warm the page cache
        res = {}
        res["tw"] = measure(f"trainwatch trace --json ({os.cpu_count()} threads)",
                            [trainwatch, "trace", "--json", str(trace)], size, ROUNDS, by="wall")
        res["tw1"] = measure("trainwatch trace --json --threads 1",
                             [trainwatch, "trace", "--json", "--threads", "1", str(trace)], size, ROUNDS)
        print("    --threads 1 output " + ("identical" if res["tw1"][2] == res["tw"][2] else "DIFFERS"))
        if baseline:
            res["base"] = measure("baseline trainwatch trace --json", [baseline, "trace", "--json", str(trace)], size,
                                  ROUNDS)
            print("    baseline output " + ("identical" if res["base"][2] == res["tw"][2] else "DIFFERS"))
        res["tw_small"] = measure(f"trainwatch trace --json (1/16 size)", [trainwatch, "trace", "--json", str(small)],
                                  small_size)
        res["py"] = measure("python3 json, same breakdown", ["/usr/bin/python3", str(REFERENCE), str(trace)], size,
                            ROUNDS)
        res["pyload"] = measure("python3 json.load alone", ["/usr/bin/python3", "-c",
                                                            "import json, sys; json.load(open(sys.argv[1]))",
                                                            str(trace)], size)
        avail = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemAvailable"))) * 1024
        if avail > 14 * size:
            res["jq"] = measure("jq, total kernel time", ["jq", JQ_PROG, str(trace)], size)
        else:
            print(f"  (plain jq skipped: {avail / 2**30:.1f} GiB available, it needs about 12x the trace)")
        res["jqs"] = measure("jq --stream, total kernel time", ["jq", "-n", "--stream", JQ_STREAM_PROG, str(trace)],
                             size)
        reader_bench(build, work, trace, size)
        tw = json.loads(res["tw"][2])
        print(f"events: {tw['ranks'][0]['events']:,} ({tw['ranks'][0]['events'] / res['tw'][0] / 1e6:.2f} M/s)")
        ref = json.loads(res["py"][2]) if res["py"][2].strip() else None
        print("agreement with the Python reference: " + (compare(tw, ref) if ref else "no reference output"))
        jq_sum = float((res.get("jq") or res["jqs"])[2].strip() or "nan")
        print(f"kernel time: trainwatch {tw['ranks'][0]['kernels']['total_us']:.3f} us, jq {jq_sum:.3f} us")
        t = res["tw"][0]
        print(f"ratios (the other / trainwatch): wall against trainwatch on {os.cpu_count()} threads; per core: "
              "CPU seconds against trainwatch --threads 1 (the others use one core)")
        for key, label in (("base", "baseline"), ("py", "python json"), ("pyload", "json.load"), ("jq", "jq"),
                           ("jqs", "jq --stream")):
            if key in res:
                print(f"  vs {label:<12} {res[key][0] / t:6.1f}x wall  {res[key][3] / res['tw1'][3]:6.1f}x per core   "
                      f"peak RSS {res[key][1] / res['tw'][1]:8.1f}x")
        print(f"trainwatch memory: {res['tw_small'][1]:.1f} MiB at {small_size / 1e6:.0f} MB, {res['tw'][1]:.1f} MiB "
              f"at {size / 1e6:.0f} MB")
        corpus_bench(trainwatch, work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
