"""GPU telemetry logs given beside the training logs: paddle's
default.gpu.log and the nvidia-smi outputs (CSV, dmon, pmon, -q) are
detected, aligned in time with the launch's steps, summed up in the summary,
and used as evidence. Real files: ../shared/corpus/gpu/ and
tests/corpus-extra/gpu/ (see its SOURCES.md); the expected figures are
computed here from the files with the csv module, not taken from trainwatch."""
import csv
import datetime
import statistics

from conftest import SOURCE, analyze_json, run

PADDLE_GPU = "gpu/paddle-launch-default.gpu.log-rtx4070.csv"
CAPTURE = "gpu/nvidia-smi-capture-h100-80gb-hbm3-under-load.txt"
DRRG_0311 = SOURCE / "tests/corpus-extra/gpu/ppocr-drrg-workerlog.0.launch-0311.excerpt.log"
DRRG_0309 = "paddle-suites/ppocr-det-drrg-workerlog.0.excerpt.log"


def epoch_seconds(text, fmt):
    return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc).timestamp()


def paddle_rows(path):
    """The utilisation rows of a default.gpu.log: (line, time, util, used MiB, total MiB)."""
    rows, header = [], None
    with open(path, newline="") as f:
        for number, row in enumerate(csv.reader(f), 1):
            if row and row[0] == "index":
                header = row
            elif header and "utilization_gpu" in header and len(row) == len(header):
                r = dict(zip(header, row))
                rows.append((number, epoch_seconds(r["timestamp"], "%Y/%m/%d %H:%M:%S.%f"),
                             float(r["utilization_gpu"]), float(r["memory_used"]), float(r["memory_total"])))
    return rows


def step_times(path):
    times = []
    for line in open(path, encoding="utf-8", errors="replace"):
        if "global_step:" in line and line.startswith("["):
            times.append(epoch_seconds(line[1:20], "%Y/%m/%d %H:%M:%S"))
    return times


def capture_section(corpus, tmp_path, title):
    """One output of the nvidia-smi capture, cut at its '#' banner."""
    lines = (corpus / CAPTURE).read_text().splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith("# " + title))
    end = next(i for i in range(start + 3, len(lines)) if lines[i].startswith("####"))
    path = tmp_path / title.replace(" ", "").replace(":", "-")
    path.write_text("".join(lines[start + 3:end]))
    return path


def rules(report):
    return [f["rule"] for f in report["findings"]]


def test_paddle_gpu_log_aligned_with_the_launch_it_covers(corpus):
    """The DRRG launch of 2024/03/11 16:02 with the default.gpu.log paddle's
    launcher wrote for it: the GPU sits at 0-10% while the steps do not wait
    for data."""
    report, result = analyze_json(DRRG_0311, corpus / PADDLE_GPU)
    steps = step_times(DRRG_0311)
    used = [r for r in paddle_rows(corpus / PADDLE_GPU) if steps[0] - 60 <= r[1] <= steps[-1] + 60]
    gpu = report["summary"]["gpu"]
    assert gpu["samples"] == len(used) and gpu["aligned"] is True and gpu["gpus"] == 1
    assert gpu["samples_all"] == len(paddle_rows(corpus / PADDLE_GPU))
    assert abs(gpu["utilization_mean"] - sum(r[2] for r in used) / len(used)) < 1e-9
    assert abs(gpu["utilization_zero_share"] - sum(r[2] == 0 for r in used) / len(used)) < 1e-9
    assert gpu["memory_max_bytes"] == max(r[3] for r in used) * 1048576
    assert gpu["memory_total_bytes"] == 12282 * 1048576
    # memory at the start and the end: medians of the first and last quarter of the samples (flat here)
    quarter = len(used) // 4
    assert gpu["memory_first_bytes"] == statistics.median(r[3] for r in used[:quarter]) * 1048576
    assert gpu["memory_last_bytes"] == statistics.median(r[3] for r in used[-quarter:]) * 1048576
    assert "gpu_memory_growth" not in rules(report)
    assert (gpu["file"], gpu["line"]) == (str(corpus / PADDLE_GPU), used[0][0])
    idle = [f for f in report["findings"] if f["rule"] == "gpu_underused"]
    assert len(idle) == 1 and idle[0]["severity"] == "warning" and idle[0]["launch"] == 1
    assert (idle[0]["file"], idle[0]["line"]) == (str(corpus / PADDLE_GPU), used[0][0])
    assert f"0% in {round(gpu['utilization_zero_share'] * 100)}% of {len(used)} samples" in idle[0]["evidence"]
    assert "data_loading_bound" not in rules(report)
    # the training log keeps rank 0 and its own findings whatever the order of the files
    alone, _ = analyze_json(DRRG_0311)
    swapped, _ = analyze_json(corpus / PADDLE_GPU, DRRG_0311)
    assert set(rules(alone)) | {"gpu_underused"} == set(rules(report)) == set(rules(swapped))
    assert report["inputs"][1]["format"] == "gpu-telemetry" and report["inputs"][1]["records"] == gpu["samples_all"]
    text = run(["trainwatch", "analyze", DRRG_0311, corpus / PADDLE_GPU]).stdout
    assert f"GPU log        {len(used)} samples over the launch" in text


def test_a_gpu_log_of_another_day_is_not_used(corpus):
    """The excerpt of 2024/03/09 with the GPU log of 2024/03/11: nothing
    overlaps, so the summary has no GPU figures and an info finding says why;
    every other finding is the same as without the GPU log."""
    report, _ = analyze_json(corpus / DRRG_0309, corpus / PADDLE_GPU)
    alone, _ = analyze_json(corpus / DRRG_0309)
    assert report["summary"]["gpu"]["samples"] == 0
    info = [f for f in report["findings"] if f["rule"] == "gpu_log_not_aligned"]
    # the last launch (8: PaddleOCR's config dumps start launches, corpus_expectations.json)
    assert len(info) == 1 and info[0]["severity"] == "info" and info[0]["launch"] == report["launch_count"] == 8
    assert "2024-03-11 16:02:37" in info[0]["evidence"] and "2024-03-09 15:26:16" in info[0]["evidence"]
    assert rules(alone) + ["gpu_log_not_aligned"] == rules(report)
    assert alone["summary"]["gpu"] is None


def test_nvidia_smi_outputs_are_read(corpus, tmp_path):
    """dmon and pmon carry no time: with a log of one launch they are used
    as they are; -q and --query-gpu CSV carry their time (2026/07/14)."""
    log = tmp_path / "train.log"
    assert run(["demo-train", "--log", log, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "20"]).returncode == 0
    dmon = capture_section(corpus, tmp_path, "load :: dmon")
    report, _ = analyze_json(log, dmon)
    sm = [int(l.split()[4]) for l in dmon.read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert report["summary"]["gpu"]["samples"] == len(sm) == 5
    assert report["summary"]["gpu"]["utilization_mean"] == sum(sm) / len(sm)
    assert report["summary"]["gpu"]["aligned"] is False
    pmon = capture_section(corpus, tmp_path, "load :: pmon")
    report, _ = analyze_json(log, pmon)
    busy = [l.split() for l in pmon.read_text().splitlines() if l.strip() and not l.startswith("#") and l.split()[3] != "-"]
    assert report["summary"]["gpu"]["samples"] == len(busy) and len(busy) > 0
    for title in ("load :: query (-q)", "load :: query-gpu"):
        path = capture_section(corpus, tmp_path, title)
        report, _ = analyze_json(log, path)
        gpu = report["summary"]["gpu"]
        assert gpu["samples_all"] == 1, title
        text = path.read_text()
        if "NVSMI LOG" in text:
            stamp = next(l.split(" : ")[1].strip() for l in text.splitlines() if l.startswith("Timestamp"))
            when = epoch_seconds(stamp, "%a %b %d %H:%M:%S %Y")
        else:
            when = epoch_seconds(text.splitlines()[1].split(",")[0], "%Y/%m/%d %H:%M:%S.%f")
        assert gpu["log_first_time"] == when, title


def test_gpu_evidence_in_the_data_loading_finding(corpus, tmp_path):
    """A data-loading bound run (the demo trainer with a slow reader) with a
    GPU log: the finding cites the GPU's utilisation."""
    log = tmp_path / "train.log"
    result = run(["demo-train", "--log", log, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "40",
                  "--slow-reader", "20"], timeout=300)
    assert result.returncode == 0
    dmon = capture_section(corpus, tmp_path, "idle :: dmon")
    report, _ = analyze_json(log, dmon)
    data = [f for f in report["findings"] if f["rule"] == "data_loading_bound"]
    assert len(data) == 1
    assert f"GPU log ({dmon}:3): utilisation 0% on average, 0% in 100% of 5 samples" in data[0]["evidence"]
    assert "gpu_underused" not in rules(report)


def test_a_gpu_log_alone_is_no_training_log(corpus):
    result = run(["trainwatch", "analyze", corpus / PADDLE_GPU])
    assert result.returncode == 2
    assert "No training records found" in result.stdout


def capture_query_csv(corpus):
    """The capture's 'load :: query-gpu' section: the --query-gpu list from its
    command line, the CSV header and the row nvidia-smi printed."""
    lines = (corpus / CAPTURE).read_text().splitlines()
    start = lines.index("# load :: query-gpu (csv, what the exporter parses)")
    query = lines[start + 1].split("--query-gpu=")[1].split()[0]
    header, row = lines[start + 3], lines[start + 4]
    return query, header, row


def test_headerless_csv_read_with_gpu_columns(corpus, tmp_path):
    """nvidia-smi --format=csv,noheader rows say nothing about their columns:
    with --gpu-columns (the --query-gpu list) they are read as the same rows
    with their header are; the figures are the row's own (csv module)."""
    query, header, row = capture_query_csv(corpus)
    fields = dict(zip([h.strip() for h in header.split(",")], next(csv.reader([row], skipinitialspace=True))))
    util = float(fields["utilization.gpu [%]"].split()[0])
    used = float(fields["memory.used [MiB]"].split()[0]) * 1048576
    noheader, withheader = tmp_path / "gpu-noheader.csv", tmp_path / "gpu-header.csv"
    noheader.write_text(row + "\n")
    withheader.write_text(header + "\n" + row + "\n")
    train = SOURCE / "tests/corpus-extra/fallback/nanogpt-termux-shakespeare-train.log"  # no times: used whole
    got, result = analyze_json("--gpu-columns", query, train, noheader)
    assert result.returncode in (0, 1), result.stderr
    ref, _ = analyze_json(train, withheader)
    g = got["summary"]["gpu"]
    assert g["samples"] == g["samples_all"] == 1
    assert g["utilization_mean"] == util and g["memory_max_bytes"] == used
    assert (g["file"], g["line"]) == (str(noheader), 1)
    where = ("file", "line")
    assert {k: v for k, v in g.items() if k not in where} == {
        k: v for k, v in ref["summary"]["gpu"].items() if k not in where}


def test_headerless_csv_without_gpu_columns_is_said(corpus, tmp_path):
    _, _, row = capture_query_csv(corpus)
    noheader = tmp_path / "gpu-noheader.csv"
    noheader.write_text(row + "\n")
    train = SOURCE / "tests/corpus-extra/fallback/nanogpt-termux-shakespeare-train.log"
    result = run(["trainwatch", "analyze", train, noheader])
    assert result.returncode == 2
    said = [l for l in result.stderr.splitlines() if str(noheader) in l]
    assert len(said) == 1 and "--gpu-columns" in said[0] and "noheader" in said[0]
    # a list with no column read, or of another length, is said too
    bad = run(["trainwatch", "analyze", "--gpu-columns", "name,uuid", train, noheader])
    assert bad.returncode == 2 and "--gpu-columns takes the --query-gpu list" in bad.stderr
    other = run(["trainwatch", "analyze", "--gpu-columns", "index,utilization.gpu", train, noheader])
    assert other.returncode == 2 and "another number of columns" in other.stderr


def test_the_gpu_a_rank_used_is_read_from_its_log(corpus):
    """The DRRG launch says which GPU it runs on (ppocr's 'device
    Place(gpu:0)' and Paddle's 'device: 0, GPU Compute Capability' note):
    the summary and the gpu_underused evidence give rank 0 GPU 0's own
    samples, computed here from the CSV rows of index 0."""
    report, _ = analyze_json(DRRG_0311, corpus / PADDLE_GPU)
    steps = step_times(DRRG_0311)
    with open(corpus / PADDLE_GPU, newline="") as f:
        indexes = {n: row[0] for n, row in enumerate(csv.reader(f), 1) if row}
    used = [r for r in paddle_rows(corpus / PADDLE_GPU)
            if steps[0] - 60 <= r[1] <= steps[-1] + 60 and indexes[r[0]] == "0"]
    gpu = report["summary"]["gpu"]
    assert gpu["rank_count"] == 1 and gpu["ranks_with_gpu"] == 1
    r = gpu["ranks"][0]
    assert (r["rank"], r["gpu"], r["samples"]) == (0, 0, len(used))
    said = line_of(DRRG_0311, r["from_line"])
    assert r["from_file"] == str(DRRG_0311) and ("Place(gpu:0)" in said or "device: 0, GPU Compute" in said)
    assert r["how"] in said.replace("device: 0,", "device: 0")
    assert abs(r["utilization_mean"] - sum(u[2] for u in used) / len(used)) < 1e-9
    assert abs(r["utilization_zero_share"] - sum(u[2] == 0 for u in used) / len(used)) < 1e-9
    idle = next(f for f in report["findings"] if f["rule"] == "gpu_underused")
    assert f"rank 0 used GPU 0 ({r['how']} at {DRRG_0311}:{r['from_line']})" in idle["evidence"]
    text = run(["trainwatch", "analyze", DRRG_0311, corpus / PADDLE_GPU]).stdout
    assert f"GPU by rank    rank 0: GPU 0 ({r['how']}, {DRRG_0311}:{r['from_line']})" in text


def line_of(path, number):
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if i == number:
                return line.rstrip("\n")
    raise AssertionError(f"{path} has no line {number}")
