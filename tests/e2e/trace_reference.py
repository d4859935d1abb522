"""An independent reference for `trainwatch trace`: the same figures from
Python's json module, loading the whole trace and sorting/merging interval
lists the obvious way. Slow and memory-hungry, but easy to check by eye.
Usable as a script: python3 trace_reference.py TRACE.json[.gz] prints JSON."""
import bisect
import gzip
import json
import math
import re
import sys

STEP = re.compile(r"^Profiler?Step#(\d+)")
SUFFIX = re.compile(r"\[[0-9. ]+ ?[mu]s\]$")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    return doc if isinstance(doc, list) else doc.get("traceEvents", [])


def number_in(v):
    """A pid/tid as trainwatch reads it: a number, or the first number in a
    string ("4243(Python)", "stream 7")."""
    if isinstance(v, (int, float)):
        return int(v)
    m = re.search(r"-?\d+", str(v))
    return int(m.group()) if m else -1


def paired(events):
    """B/E duration events paired per (pid, tid) into X events, at the E."""
    stacks = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, key = e.get("ph"), (number_in(e.get("pid")), number_in(e.get("tid")))
        if ph == "B":
            stacks.setdefault(key, []).append(e)
            yield e
        elif ph == "E":
            if stacks.get(key) and isinstance(e.get("ts"), (int, float)):
                b = stacks[key].pop()
                args = dict(e.get("args") or {})
                args.update(b.get("args") or {})
                yield dict(b, ph="X", dur=e["ts"] - b["ts"], args=args)
        else:
            yield e


def comm_correlations(events):
    """Correlation ids of runtime calls made inside a Paddle Communication
    span on their thread: their kernels communicate."""
    spans = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "communication":
            spans.setdefault((number_in(e.get("pid")), number_in(e.get("tid"))), []).append(
                (e["ts"], e["ts"] + e["dur"]))
    out = set()
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") == "X" and cat in ("cuda_runtime", "runtime", "cudaruntime", "cuda_driver"):
            key = (number_in(e.get("pid")), number_in(e.get("tid")))
            corr = (e.get("args") or {}).get("correlation id", (e.get("args") or {}).get("correlation"))
            if corr is not None and any(a <= e["ts"] < b for a, b in spans.get(key, ())):
                out.add(corr)
    return out


def is_comm(name):
    return name.startswith(("nccl", "rccl", "hccl")) or any(
        s in name for s in ("ncclKernel", "ncclDevKernel", "c_allreduce", "all_reduce_kernel"))


def kind(e):
    if e.get("ph") != "X":
        return None
    name, cat = SUFFIX.sub("", str(e.get("name", ""))), str(e.get("cat", "")).lower()
    if cat == "kernel":
        if name.startswith(("Memcpy", "hipMemcpy", "dma", "Memset", "hipMemset")):
            return "mem"
        return "comm" if is_comm(name) else "comp"
    if cat in ("gpu_memcpy", "memcpy", "gpu_memset", "memset"):
        return "mem"
    if cat in ("cuda_sync", "cuda_runtime", "runtime", "cudaruntime", "cuda_driver", "gpu_user_annotation"):
        return None
    if STEP.match(name):
        return "step"
    if cat == "dataloader" or "DataLoader" in name or "Dataloader" in name:
        return "data"
    return None


class Merged(list):
    """Disjoint sorted [a, b] intervals, with their ends for bisect."""

    def from_lo(self, lo):
        """The intervals from the first one ending after lo, in order."""
        for i in range(bisect.bisect_right(self.ends, lo), len(self)):
            yield self[i]


def union(intervals):
    out = Merged()
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    out.ends = [b for _, b in out]
    return out


def covered(merged, lo, hi):
    total = 0.0
    for a, b in merged.from_lo(lo):
        if a >= hi:
            break
        total += max(0.0, min(b, hi) - max(a, lo))
    return total


def reference(path):
    events = list(paired(load(path)))
    comm_corr = comm_correlations(events)
    sets = {"comp": [], "comm": [], "mem": [], "data": []}
    steps, kernels, copies, streams = [], {}, {}, {}
    for e in events:
        k = kind(e)
        args = e.get("args") or {}
        if k == "comp" and args.get("correlation id", args.get("correlation")) in comm_corr:
            k = "comm"
        ts, dur = e.get("ts"), e.get("dur")
        if k is None or not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
            continue
        if not (math.isfinite(ts) and math.isfinite(dur) and dur >= 0):
            continue
        name = SUFFIX.sub("", str(e["name"]))
        if k == "step":
            steps.append((ts, ts + dur, int(STEP.match(name).group(1))))
            continue
        sets[k].append((ts, ts + dur))
        if k == "data":
            continue
        dev = args.get("device") if isinstance(args.get("device"), (int, float)) else number_in(e.get("pid"))
        stream = args.get("stream") if isinstance(args.get("stream"), (int, float)) else number_in(e.get("tid"))
        st = streams.setdefault(f"{int(dev)}/{int(stream)}", {"kernels": 0, "copies": 0, "compute_us": 0.0,
                                                              "comm_us": 0.0, "memcpy_us": 0.0,
                                                              "start_us": ts, "end_us": ts + dur})
        st["copies" if k == "mem" else "kernels"] += 1
        st[{"comp": "compute_us", "comm": "comm_us", "mem": "memcpy_us"}[k]] += dur
        st["start_us"], st["end_us"] = min(st["start_us"], ts), max(st["end_us"], ts + dur)
        if k in ("comp", "comm"):
            s = kernels.setdefault(name[:255], [0, 0.0])
            s[0] += 1
            s[1] += dur
        if k == "mem":
            args = e.get("args", {})
            d = "memset" if name.startswith("Memset") or "memset" in str(e.get("cat", "")).lower() else next(
                (x for x in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP") if x in name), "other")
            c = copies.setdefault(d, [0, 0.0])
            c[0] += 1
            c[1] += args.get("bytes", 0) if isinstance(args.get("bytes"), (int, float)) else 0
    comp, ck = union(sets["comp"]), union(sets["comp"] + sets["comm"])
    comm, allw, data = union(sets["comm"]), union(sets["comp"] + sets["comm"] + sets["mem"]), union(sets["data"])
    if steps:
        windows = sorted(steps)
    elif allw:
        windows = [(allw[0][0], allw[-1][1], -1)]
    else:
        windows = []
    out_steps = []
    for lo, hi, sid in windows:
        C, CK, A, K = covered(comp, lo, hi), covered(ck, lo, hi), covered(allw, lo, hi), covered(comm, lo, hi)
        gaps = []  # the idle gaps inside the window
        prev = lo
        for a, b in allw.from_lo(lo):
            if a >= hi:
                break
            if a > prev:
                gaps.append((prev, a))
            prev = max(prev, b)
        if hi > prev:
            gaps.append((prev, hi))
        idle_data = sum(covered(data, a, b) for a, b in gaps)
        out_steps.append({"id": sid, "wall_us": hi - lo, "compute_us": C, "comm_us": CK - C, "memcpy_us": A - CK,
                          "idle_us": (hi - lo) - A, "idle_dataloader_us": idle_data, "comm_total_us": K,
                          "comm_overlap_us": K - (CK - C)})
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:10]
    return {"steps": out_steps, "kernel_count": sum(v[0] for v in kernels.values()),
            "kernel_total_us": sum(v[1] for v in kernels.values()),
            "top_kernels": [(n, v[0], v[1]) for n, v in top], "copies": copies, "streams": streams,
            "merged_intervals": {"compute": len(comp), "comm": len(comm), "all": len(allw), "data": len(data)}}


if __name__ == "__main__":
    print(json.dumps(reference(sys.argv[1]), indent=1))
