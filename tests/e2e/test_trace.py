"""`trainwatch trace` against an independent Python reference
(trace_reference.py: json.load, sort, merge), on every trace of the corpus,
a paddle.profiler chrome trace made by a generator that follows REFERENCE.md
6.2 to the letter (no public Paddle trace file is in the corpus), the Paddle
summary-text excerpts, and bad input."""
import gzip
import json
import os
import pathlib
import re
import subprocess
import time

import pytest

import trace_reference
from conftest import CORPUS, binary, run

TRACES = CORPUS / "traces"
KINETO = sorted(TRACES.glob("*.json.gz"))


@pytest.fixture
def traces(corpus):
    """The corpus's traces folder; the test is skipped, with a message, when
    ../shared/corpus is absent (conftest's corpus fixture)."""
    return corpus / "traces"


def trace_json(*paths, expect=(0, 1)):
    result = run(["trainwatch", "trace", "--json", *paths])
    assert result.returncode in expect, result.stderr
    return json.loads(result.stdout), result


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a)) + 0.01


def test_corpus_traces_are_there(corpus):
    """The corpus's traces (when ../shared/corpus is there at all): an empty
    folder must not pass as every trace agreeing with the reference."""
    assert len(KINETO) >= 8, f"{corpus / 'traces'} holds {len(KINETO)} traces"


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_figures_agree_with_the_python_reference(path):
    ref = trace_reference.reference(str(path))
    doc, _ = trace_json(path)
    rank = doc["ranks"][0]
    assert rank["error"] is None
    got = rank["steps"] or ([dict(rank["total"], id=-1)] if rank["total"]["wall_us"] > 0 else [])
    assert [s["id"] for s in got] == [s["id"] for s in ref["steps"]]
    for r, c in zip(ref["steps"], got):
        for key in ("wall_us", "compute_us", "comm_us", "memcpy_us", "idle_us", "comm_total_us", "comm_overlap_us"):
            assert close(r[key], c[key]), (r["id"], key, r[key], c[key])
        assert close(r["idle_dataloader_us"], c["idle"]["dataloader_us"]), r["id"]
        idle = c["idle"]
        assert close(c["idle_us"], idle["dataloader_us"] + idle["sync_us"] + idle["kernel_gap_us"] + idle["host_us"])
    assert rank["kernels"]["count"] == ref["kernel_count"]
    assert close(rank["kernels"]["total_us"], ref["kernel_total_us"])
    assert [k["name"] for k in rank["top_kernels"][:5]] == [n for n, _, _ in ref["top_kernels"][:5]]
    for name, (count, size) in ref["copies"].items():
        assert rank["copies"][name]["count"] == count
        assert close(rank["copies"][name]["bytes"], size)
    assert_streams_agree(rank, ref)


def assert_streams_agree(rank, ref):
    """Per (device, stream): counts, compute/comm/memcpy time and the span;
    idle is the span less the busy time."""
    assert rank["streams_over"] == 0
    got = {f"{s['device']}/{s['stream']}": s for s in rank["streams"]}
    assert set(got) == set(ref["streams"])
    for key, r in ref["streams"].items():
        g = got[key]
        for k in ("kernels", "copies", "compute_us", "comm_us", "memcpy_us", "start_us", "end_us"):
            assert close(r[k], g[k]), (key, k, r[k], g[k])
        busy = r["compute_us"] + r["comm_us"] + r["memcpy_us"]
        assert close(g["idle_us"], max(0.0, r["end_us"] - r["start_us"] - busy)), key


def rules(doc):
    return {f["rule"] for f in doc["findings"]}


def test_resnet50_without_workers_is_data_loading_bound(traces):
    doc, result = trace_json(traces / "kineto-resnet50-num_workers_0.pt.trace.json.gz")
    assert "data_loading_bound" in rules(doc)
    f = next(f for f in doc["findings"] if f["rule"] == "data_loading_bound")
    assert f["severity"] == "warning" and f["value"] > 0.15 and f["step"] is not None
    text = run(["trainwatch", "trace", "--no-color", traces / "kineto-resnet50-num_workers_0.pt.trace.json.gz"])
    assert "Data loading bound" in text.stdout and "num_workers" in text.stdout


def test_resnet50_with_four_workers_is_not(traces):
    doc, _ = trace_json(traces / "kineto-resnet50-num_workers_4.pt.trace.json.gz")
    assert "data_loading_bound" not in rules(doc)
    assert doc["healthy"] is True
    text = run(["trainwatch", "trace", "--no-color", traces / "kineto-resnet50-num_workers_4.pt.trace.json.gz"])
    assert text.returncode == 0 and "Healthy" in text.stdout


def test_legacy_schema_self_time_and_launches(traces):
    doc, _ = trace_json(traces / "kineto-resnet50-num_workers_0.pt.trace.json.gz")
    rank = doc["ranks"][0]
    assert rank["source"] == "kineto-legacy"
    ops = {o["name"]: o for o in rank["top_operators"]}
    # ProfilerStep spans are steps, not operators; an operator's self time is below its total
    assert not any(n.startswith("ProfilerStep") for n in ops)
    assert any(o["self_us"] < o["total_us"] for o in rank["top_operators"])
    assert rank["kernels"]["launches_matched"] > 0.9 * rank["kernels"]["count"]
    assert rank["top_kernels"][0]["issuer"].startswith("aten::")
    assert rank["pageable_copies"] == 12


def test_paddle_summary_reader_ratio(traces):
    doc, result = trace_json(traces / "paddle-profiler-summary-dataloader-bound-before-after.md.txt")
    rank = doc["ranks"][0]
    assert rank["source"] == "paddle-summary"
    assert rank["reader_ratios"] == pytest.approx([0.53514, 0.01653])
    bound = [f for f in doc["findings"] if f["rule"] == "data_loading_bound"]
    assert len(bound) == 1 and bound[0]["value"] == pytest.approx(0.53514)  # 53.5%: bound; 1.65%: not
    doc, _ = trace_json(traces / "paddle-profiler-summary-tables-reference.md.txt")
    assert doc["ranks"][0]["reader_ratios"] == pytest.approx([0.00989])
    assert "data_loading_bound" not in rules(doc)


def summary_tables_by_hand(text):
    """The Paddle summary tables read independently: every row of each
    titled table, split at runs of two or more spaces, "a / b / c / d / e"
    groups kept as strings."""
    tables, current = {}, None
    for line in text.splitlines():
        title = re.match(r"^\s*[-=]+([A-Za-z ]+ Summary)[-=]+\s*$", line)
        if title:
            current = tables.setdefault(title.group(1), [])
            continue
        stripped = line.strip()
        if current is None or not stripped or stripped.startswith(("```", "Note:")):
            current = None
            continue
        if stripped[0] in "-=|" or stripped.startswith(("Time unit", "Name ", "Event Type", "Device ", "Calls")):
            continue
        current.append(re.split(r"\s{2,}", stripped))
    return tables


def test_paddle_summary_tables(traces):
    path = traces / "paddle-profiler-summary-tables-reference.md.txt"
    hand = summary_tables_by_hand(path.read_text())
    doc, _ = trace_json(path)
    rank = doc["ranks"][0]
    sm = rank["summary"]
    assert [[d["name"], d["utilization"]] for d in sm["devices"]] == [
        [name, pytest.approx(float(v) / 100)] for name, v in hand["Device Summary"]]
    assert [o["name"] for o in sm["overview"]] == [row[0] for row in hand["Overview Summary"]]
    for o, row in zip(sm["overview"], hand["Overview Summary"]):
        t = o["gpu_total_us"] if o["gpu_total_us"] is not None else o["cpu_total_us"]
        assert o["calls"] == int(row[1]) and t == pytest.approx(float(row[2]) * 1000)
    assert [m["name"] for m in sm["model"]] == [row[0] for row in hand["Model Summary"]]
    for m, row in zip(sm["model"], hand["Model Summary"]):
        cpu, gpu = [[None if x.strip() == "-" else float(x) for x in g.split("/")] for g in row[2:4]]
        assert m["cpu_total_us"] == pytest.approx(cpu[0] * 1000) and m["gpu_total_us"] == pytest.approx(gpu[0] * 1000)
        assert m["gpu_ratio"] == pytest.approx(gpu[4] / 100)
    assert sm["model"][1]["depth"] == 1 and sm["model"][0]["depth"] == 0
    dist = {row[0]: float(row[1]) * 1000 for row in hand["Distribution Summary"]}
    assert sm["distribution"] == pytest.approx({"step_us": dist["ProfileStep"], "overlap_us": dist["Overlap"],
                                                "communication_us": dist["Communication"],
                                                "computation_us": dist["Computation"]})
    kernels = sorted(hand["Kernel Summary"], key=lambda row: -float(row[2].split("/")[0]))
    assert sm["kernel_rows"] == len(kernels)
    assert [(k["name"], k["count"]) for k in rank["top_kernels"]] == [(r[0], int(r[1])) for r in kernels[:10]]
    assert rank["top_kernels"][0]["total_us"] == pytest.approx(float(kernels[0][2].split("/")[0]) * 1000)
    # top-level operators only (their children are indented)
    assert [o["name"] for o in rank["top_operators"]] == ["conv2d_grad grad_node", "sync_batch_norm_grad grad_node"]
    text = run(["trainwatch", "trace", "--no-color", path]).stdout
    assert "GPU2           55.50% utilised" in text and "overlap 0.79%" in text


def paddle_trace(path, steps=4, data_ms=30.0, compute_ms=10.0, comm=False):
    """A chrome trace the way paddle.profiler's ChromeTracingLogger writes it
    (REFERENCE.md 6.2): printf'd JSON, capitalised cats, "name[x ms]" suffixes,
    string tids, device events with pid = device and tid = stream, and the
    trailing {} sentinel."""
    ev = []
    t = 1000000
    for n in range(steps):
        step = (data_ms + compute_ms + 2) * 1000
        ev.append(f'{{ "name": "ProfileStep#{n}[{step / 1000:.3f} ms]", "pid": 4242, "tid": "4243(Python)", '
                  f'"ts": {t}, "dur": {step:.3f}, "ph": "X", "cat": "ProfileStep", '
                  f'"args": {{ "start_time": "{t:.3f} us", "end_time": "{t + step:.3f} us" }} }}')
        ev.append(f'{{ "name": "Dataloader[{data_ms:.3f} ms]", "pid": 4242, "tid": "4243(Python)", '
                  f'"ts": {t + 500}, "dur": {data_ms * 1000:.3f}, "ph": "X", "cat": "Dataloader", "args": {{ }} }}')
        k0 = t + 500 + data_ms * 1000 + 200
        ev.append(f'{{ "name": "matmul dygraph[{compute_ms:.3f} ms]", "pid": 4242, "tid": "4243(C++)", '
                  f'"ts": {int(k0) - 100}, "dur": {compute_ms * 1000 + 150:.3f}, "ph": "X", "cat": "Operator", '
                  f'"args": {{ "input_shapes": "{{}}" }} }}')
        ev.append(f'{{ "name": "cudaLaunchKernel[0.010 ms]", "pid": 4242, "tid": "4243(C++)", "ts": {int(k0) - 50}, '
                  f'"dur": 10.000, "ph": "X", "cat": "CudaRuntime", "args": {{ "correlation id": {n + 1} }} }}')
        ev.append(f'{{ "name": "void gemm_kernel<float>(float*, int)[{compute_ms:.3f} ms]", "pid": 0, "tid": 7, '
                  f'"ts": {int(k0)}, "dur": {compute_ms * 1000:.3f}, "ph": "X", "cat": "Kernel", '
                  f'"args": {{ "device": 0, "context": 1, "stream": 7, "correlation id": {n + 1}, '
                  f'"registers per thread": 64, "theoretical achieved occupancy %": 50.0 }} }}')
        ev.append(f'{{ "name": "MEMCPY_HtoD[0.100 ms]", "pid": 0, "tid": 7, "ts": {int(k0) + compute_ms * 1000 + 10}, '
                  f'"dur": 100.000, "ph": "X", "cat": "Memcpy", '
                  f'"args": {{ "stream": 7, "correlation id": {n + 100}, "bytes": 1048576, '
                  f'"memory bandwidth (GB/s)": 10.485 }} }}')
        ev.append(f'{{ "name": "[memory]", "pid": 4242, "tid": "4243(C++)", "ts": {t + 600}, "ph": "i", '
                  f'"cat": "Allocate", "args": {{ "place": "Place(gpu:0)", "addr": 140000, "increase_bytes": 1024, '
                  f'"current_allocated": {1000000 * (n + 1)}, "current_reserved": {2000000 * (n + 1)}, '
                  f'"peak_allocated": {1000000 * (n + 1)}, "peak_reserved": {2000000 * (n + 1)} }} }}')
        if comm:  # a Communication span launching a kernel whose name says nothing of NCCL, on stream 9
            c0 = int(k0) + 1000
            ev.append(f'{{ "name": "ProcessGroupNCCL::AllReduce[2.100 ms]", "pid": 4242, "tid": "4243(C++)", '
                      f'"ts": {c0}, "dur": 2100.000, "ph": "X", "cat": "Communication", "args": {{ }} }}')
            ev.append(f'{{ "name": "cudaLaunchKernel[0.010 ms]", "pid": 4242, "tid": "4243(C++)", "ts": {c0 + 20}, '
                      f'"dur": 10.000, "ph": "X", "cat": "CudaRuntime", "args": {{ "correlation id": {n + 500} }} }}')
            ev.append(f'{{ "name": "void phi::AllReduceImpl<float>(float*, int)[2.000 ms]", "pid": 0, "tid": 9, '
                      f'"ts": {c0 + 50}, "dur": 2000.000, "ph": "X", "cat": "Kernel", '
                      f'"args": {{ "device": 0, "context": 1, "stream": 9, "correlation id": {n + 500} }} }}')
        t += int(step) + 10
    text = ('{\n"schemaVersion": "1.0.0",\n"displayTimeUnit": "ms",\n"span_indx": "0",\n'
            '"deviceProperties": [{"id": 0, "name": "Tesla V100", "totalGlobalMem": 16945512448}],\n'
            '"traceEvents": [\n' + ",\n".join(ev) + ',\n{}\n],\n"ExtraInfo": {}\n}\n')
    path.write_text(text)
    return path


def test_paddle_chrome_trace_from_the_generator(tmp_path):
    path = paddle_trace(tmp_path / "pid_4242_time_2024_01_01_00_00_00_000000.paddle_trace.json")
    json.loads(path.read_text())  # the generator's output is JSON (the trailing {} is legal)
    ref = trace_reference.reference(str(path))
    doc, _ = trace_json(path)
    rank = doc["ranks"][0]
    assert rank["source"] == "paddle" and rank["error"] is None
    assert [s["id"] for s in rank["steps"]] == [0, 1, 2, 3]
    for r, c in zip(ref["steps"], rank["steps"]):
        for key in ("wall_us", "compute_us", "memcpy_us", "idle_us"):
            assert close(r[key], c[key]), key
        assert close(r["idle_dataloader_us"], c["idle"]["dataloader_us"])
    assert rank["top_kernels"][0]["name"] == "void gemm_kernel<float>(float*, int)"  # suffix stripped
    assert rank["top_kernels"][0]["issuer"] == "matmul dygraph"
    assert rank["kernels"]["launches_matched"] == 4
    assert rank["copies"]["HtoD"]["bytes"] == 4 * 1048576
    assert rank["steps"][3]["peak_allocated_bytes"] == 4000000
    assert "data_loading_bound" in rules(doc)
    fast = paddle_trace(tmp_path / "fast.paddle_trace.json", data_ms=0.5, compute_ms=30)
    doc, _ = trace_json(fast)
    assert "data_loading_bound" not in rules(doc)


def test_stream_table_in_text(traces):
    text = run(["trainwatch", "trace", "--no-color", traces / "hta-nccl-a100.kineto.json.gz"]).stdout
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if l.split()[:1] == ["device/stream"])
    rows = {l.split()[0]: l.split() for l in lines[head + 1:head + 3]}
    assert set(rows) == {"0/7", "0/40"}
    assert rows["0/40"][5] != "0.0%" and rows["0/7"][4] != "0.0%"  # the NCCL stream communicates, 7 computes


def begin_end_trace(path):
    """Chrome duration events as begin/end pairs (ph B / ph E) per thread,
    nested on the host and interleaved across two GPU streams, with one E
    that ends nothing."""
    ev = [{"ph": "B", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0},
          {"ph": "B", "cat": "user_annotation", "name": "enumerate(DataLoader)#x", "pid": 1, "tid": 1, "ts": 10},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 300},
          {"ph": "B", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 320,
           "args": {"device": 0, "stream": 7}},
          {"ph": "B", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 20, "ts": 350,
           "args": {"device": 0, "stream": 20}},
          {"ph": "E", "pid": 0, "tid": 7, "ts": 420},
          {"ph": "B", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 430,
           "args": {"device": 0, "stream": 7, "bytes": 4096}},
          {"ph": "E", "pid": 0, "tid": 7, "ts": 440},
          {"ph": "E", "pid": 0, "tid": 20, "ts": 600},
          {"ph": "E", "pid": 0, "tid": 99, "ts": 610},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 1000}]
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_begin_end_events_are_paired_per_thread(tmp_path):
    path = begin_end_trace(tmp_path / "be.json")
    ref = trace_reference.reference(str(path))
    doc, _ = trace_json(path)
    rank = doc["ranks"][0]
    assert [s["id"] for s in rank["steps"]] == [1] and rank["steps"][0]["wall_us"] == 1000
    step = rank["steps"][0]
    for key in ("wall_us", "compute_us", "comm_us", "memcpy_us", "idle_us", "comm_total_us", "comm_overlap_us"):
        assert close(ref["steps"][0][key], step[key]), key
    assert step["compute_us"] == 100 and step["comm_total_us"] == 250 and step["memcpy_us"] == 0
    assert step["idle"]["dataloader_us"] == 290  # GPU idle 0-320 of which 10-300 is the DataLoader span
    assert rank["copies"]["HtoD"]["bytes"] == 4096
    assert rank["skipped"] == 1  # the E that ends nothing
    assert_streams_agree(rank, ref)


def test_paddle_communication_spans_make_their_kernels_communication(tmp_path):
    path = paddle_trace(tmp_path / "comm.paddle_trace.json", data_ms=1, compute_ms=10, comm=True)
    ref = trace_reference.reference(str(path))
    doc, _ = trace_json(path)
    rank = doc["ranks"][0]
    kernel = "void phi::AllReduceImpl<float>(float*, int)"
    assert kernel in {k["name"] for k in rank["top_kernels"]}
    for r, c in zip(ref["steps"], rank["steps"]):
        assert close(r["comm_total_us"], c["comm_total_us"]) and c["comm_total_us"] == 2000
        assert close(r["compute_us"], c["compute_us"])
    assert_streams_agree(rank, ref)
    assert ref["streams"]["0/9"]["comm_us"] == 4 * 2000


def test_two_ranks_from_distributed_info(traces):
    doc, _ = trace_json(traces / "hta-sampled-rank1-ws128.kineto.json.gz", traces / "hta-sampled-rank0-ws128.kineto.json.gz")
    assert [r["rank"] for r in doc["ranks"]] == [1, 0]
    assert "comm_wait" in rules(doc)
    for r in doc["ranks"]:
        t = r["total"]
        assert 0 < t["comm_overlap_us"] <= t["comm_total_us"]


def test_straggler_across_ranks(tmp_path):
    a = paddle_trace(tmp_path / "workerlog.0.json", data_ms=1, compute_ms=10)
    b = paddle_trace(tmp_path / "workerlog.1.json", data_ms=1, compute_ms=10)
    c = paddle_trace(tmp_path / "workerlog.2.json", data_ms=1, compute_ms=30)
    doc, _ = trace_json(a, b, c)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2]
    s = [f for f in doc["findings"] if f["rule"] == "straggler"]
    assert len(s) == 1 and s[0]["rank"] == 2


# ---- bad input ---------------------------------------------------------------

def test_truncated_trace_reports_where_and_analyses_what_it_read(tmp_path, traces):
    data = gzip.decompress((traces / "kineto-resnet50-num_workers_0.pt.trace.json.gz").read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    result = run(["trainwatch", "trace", "--json", cut])
    assert result.returncode in (0, 1)
    assert "cut.json" in result.stderr and "end of input" in result.stderr
    rank = json.loads(result.stdout)["ranks"][0]
    assert rank["events"] > 10000 and "at byte" in rank["error"]
    assert "trace_incomplete" in rules(json.loads(result.stdout))
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes((traces / "kineto-resnet50-num_workers_0.pt.trace.json.gz").read_bytes()[:400000])
    result = run(["trainwatch", "trace", "--json", gz])
    assert result.returncode in (0, 1) and "gzip" in result.stderr
    assert json.loads(result.stdout)["ranks"][0]["events"] > 1000


@pytest.mark.parametrize("content", [b"", b"hello world\n", b"\x00\x01\x02binary", b"[1, 2", b"{\"traceEvents\": 5"])
def test_not_a_trace_is_a_clear_error(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = run(["trainwatch", "trace", path])
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l]
    assert len(lines) == 1 and "bad.json" in lines[0]


def test_missing_file_and_directory(tmp_path):
    for p in (tmp_path / "nope.json", tmp_path):
        result = run(["trainwatch", "trace", p])
        assert result.returncode == 2 and str(p) in result.stderr


def test_odd_events_are_counted_not_fatal(tmp_path):
    huge = "k" * (4 << 20)
    events = [
        {"ph": "X", "cat": "kernel", "name": huge, "pid": 0, "tid": 7, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": 7, "ts": 20},
        {"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 30, "dur": -4},
        {"ph": "Q", "cat": "kernel", "name": "unknown_ph", "pid": 0, "tid": 7, "ts": 40, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 50, "dur": 10, "args": {}},
    ]
    text = json.dumps({"traceEvents": events})
    nested = '{"a":' * 200000 + "1" + "}" * 200000
    text = text.replace('"args": {}', '"args": ' + nested)
    text = text.replace('"ts": 30', '"ts": NaN')
    path = tmp_path / "odd.json"
    path.write_text(text)
    doc, result = trace_json(path)
    rank = doc["ranks"][0]
    assert rank["error"] is None
    assert rank["events"] == 5 and rank["skipped"] == 3 and rank["names_cut"] == 1
    assert rank["kernels"]["count"] == 2 and rank["kernels"]["total_us"] == 15


def test_stdin_and_bare_array(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5},]
    result = run(["trainwatch", "trace", "--json", "-"], input=json.dumps(events))
    rank = json.loads(result.stdout)["ranks"][0]
    assert rank["total"]["wall_us"] == 15 and rank["total"]["compute_us"] == 10 and rank["total"]["idle_us"] == 5


def test_no_progress_line_when_not_a_tty(traces):
    result = run(["trainwatch", "trace", traces / "kineto-resnet50-num_workers_4.pt.trace.json.gz"])
    assert result.stderr == ""
    result = run(["trainwatch", "trace", "--progress=always", traces / "kineto-resnet50-num_workers_4.pt.trace.json.gz"])
    assert result.returncode == 0


# ---- several threads ---------------------------------------------------------

@pytest.mark.parametrize("name", ["kineto-resnet50-num_workers_0.pt.trace.json.gz",
                                  "kineto-resnet50-num_workers_4.pt.trace.json.gz"])
def test_threads_give_the_one_thread_report(tmp_path, name, traces):
    """A plain file of 25 MB is read in 4 MiB pieces by several threads (the
    default on a machine with more than one core): byte for byte the report
    of --threads 1, which itself agrees with the Python reference above; the
    same for the file cut short in the middle of a piece, error included."""
    data = gzip.decompress((traces / name).read_bytes())
    plain = tmp_path / "trace.json"
    for size in (len(data), len(data) * 5 // 9):
        plain.write_bytes(data[:size])
        one = run(["trainwatch", "trace", "--json", "--threads", "1", plain])
        assert one.returncode in (0, 1)
        for threads in ("2", "4", "0"):
            many = run(["trainwatch", "trace", "--json", "--threads", threads, plain])
            assert (many.returncode, many.stdout, many.stderr) == (one.returncode, one.stdout, one.stderr), threads
        rank = json.loads(one.stdout)["ranks"][0]
        assert (rank["error"] is None) == (size == len(data))


@pytest.mark.parametrize("value", ["-1", "17", "2.5", "many"])
def test_threads_option_is_checked(tmp_path, value):
    good = tmp_path / "t.json"
    good.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}')
    result = run(["trainwatch", "trace", "--threads", value, good])
    assert result.returncode == 2 and "--threads" in result.stderr


def test_a_file_cut_while_it_is_read_is_an_error_not_a_crash(tmp_path):
    """trace reads plain files through read-only mappings; a file cut shorter
    while it is read faults where the mapping is read (SIGBUS). Whatever
    moment the cut comes (before, during or after the read), trace must end
    by itself: a report, or exit 2 with one line naming what happened, never
    killed by a signal."""
    path = tmp_path / "big.json"
    line = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 5},\n'
    body = "".join(line % (10 * i) for i in range(600000))
    data = ('{"traceEvents": [\n' + body + '{}]}\n').encode()
    seen = set()
    for threads in ("1", "2"):
        for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.05):
            path.write_bytes(data)
            proc = subprocess.Popen([binary("trainwatch"), "trace", "--json", "--threads", threads, str(path)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            os.truncate(path, 4096)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode in (0, 1, 2), (threads, delay, proc.returncode, err)
            if proc.returncode == 2:
                lines = [l for l in err.splitlines() if l]
                assert len(lines) == 1 and "big.json" in lines[0], err
            seen.add(proc.returncode)
    assert seen, "no run ended"
