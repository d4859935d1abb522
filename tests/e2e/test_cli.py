"""The command line: usage and help, output modes, thresholds, and the demo
trainer's faults each producing the diagnosis they should."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import SOURCE, binary, run


def test_no_arguments_is_a_usage_error():
    result = run(["trainwatch"])
    assert result.returncode == 2
    assert "usage: trainwatch COMMAND" in result.stderr


def test_help_lists_every_command_from_the_table():
    result = run(["trainwatch", "--help"])
    assert result.returncode == 0
    assert "analyze" in result.stdout and "formats" in result.stdout


def test_unknown_command_and_option():
    assert run(["trainwatch", "frobnicate"]).returncode == 2
    result = run(["trainwatch", "analyze", "--bogus", "x.log"])
    assert result.returncode == 2
    assert "--bogus" in result.stderr


def test_analyze_help_documents_every_threshold():
    out = run(["trainwatch", "analyze", "--help"]).stdout
    for flag in ["--data-share", "--stall-seconds", "--spike-factor", "--device-memory", "--straggler", "--json", "--records"]:
        assert flag in out


def test_formats_lists_the_table():
    out = run(["trainwatch", "formats"]).stdout.split("\n")
    names = [line.split()[0] for line in out if line]
    assert names[:2] == ["trainwatch", "events"]
    for name in ["hapi", "ppocr", "ppdet", "ppcls", "paddleseg", "paddlevideo", "paddlenlp", "megatron",
                 "deepspeed", "tqdm", "mmdet", "detectron2", "yolo", "json", "detr", "hf-trainer-state", "olmo", "glog",
                 "pylogging", "kv"]:
        assert name in names


def train(tmp_path, *flags):
    """Runs the demo trainer. Small batches keep its compute tiny next to the
    injected delays even in the sanitized build, so the diagnosis does not
    depend on how fast this machine is."""
    log = tmp_path / "train.log"
    result = run(["demo-train", "--log", log, "--batch", "8", *flags], timeout=300)
    return log, result


def findings(report):
    return {f["rule"]: f for f in report["findings"]}


def analyze(*args):
    result = run(["trainwatch", "analyze", "--json", *args])
    return json.loads(result.stdout), result


def test_demo_healthy_run(tmp_path):
    # the simulated kernels' 10 ms, not this machine's microseconds, are the
    # step time: CI under load made 31% of noise a "throughput drop"
    log, result = train(tmp_path, "--epochs", "3", "--steps-per-epoch", "40", "--log-interval", "5",
                        "--compute-ms", "10")
    assert result.returncode == 0
    report, status = analyze(log)
    assert report["healthy"], [f["title"] for f in report["findings"]]
    assert status.returncode == 0
    assert report["summary"]["step_records"] == 24
    assert report["summary"]["eval_metrics"][0]["name"] == "acc"


def test_demo_slow_reader_is_data_loading_bound(tmp_path):
    log, _ = train(tmp_path, "--epochs", "2", "--steps-per-epoch", "20", "--log-interval", "5", "--slow-reader", "20")
    report, status = analyze(log)
    f = findings(report)["data_loading_bound"]
    assert f["value"] > 0.5
    assert "num_workers" in f["recommendation"]
    assert status.returncode == 0  # a warning, not an error


def test_demo_lr_spike_turns_loss_nan(tmp_path):
    log, _ = train(tmp_path, "--epochs", "2", "--steps-per-epoch", "50", "--log-interval", "10", "--lr-spike-at", "40")
    text = log.read_text()
    first_nan = next(i for i, line in enumerate(text.splitlines(), 1) if "loss: nan" in line or "loss: -nan" in line)
    report, status = analyze(log)
    f = findings(report)["nan_loss"]
    assert f["line"] == first_nan
    assert f["step"] == 50
    assert "learning rate jumped 1000x" in f["evidence"]
    assert status.returncode == 1


def test_demo_memory_leak_is_growth(tmp_path):
    log, _ = train(tmp_path, "--epochs", "2", "--steps-per-epoch", "50", "--log-interval", "5", "--leak-mb", "2")
    report, _ = analyze(log, "--device-memory", "1")
    f = findings(report)["memory_growth"]
    assert f["value"] > 1.0
    assert "device is full around step" in f["evidence"]


def test_demo_stall(tmp_path):
    log, _ = train(tmp_path, "--epochs", "1", "--steps-per-epoch", "30", "--log-interval", "1",
                   "--slow-reader", "10", "--stall-at", "20", "--stall-seconds", "3")
    report, _ = analyze(log, "--stall-seconds", "1")
    f = findings(report)["stall"]
    assert f["step"] == 20
    assert 2.5 < f["value"] < 6
    # by default too: 3 s is far outside steps of ~10 ms (issue 27, item 3)
    report, _ = analyze(log)
    f = findings(report)["stall"]
    assert f["step"] == 20 and f["line"] == 21
    assert "(p95)" in f["evidence"]
    # a pause shorter than --pause-seconds is no stall
    report, _ = analyze(log, "--pause-seconds", "10")
    assert "stall" not in findings(report)


def test_demo_crash(tmp_path):
    log, result = train(tmp_path, "--epochs", "2", "--steps-per-epoch", "50", "--log-interval", "5", "--crash-at", "33")
    assert result.returncode == 1
    report, status = analyze(log)
    f = findings(report)["crash"]
    assert "simulated failure in step 33" in f["evidence"]
    assert "last frame: File \"tools/program.py\", line 301, in train" in f["evidence"]
    assert f["step"] == 30
    assert "last step logged before it: 30, in epoch 1 of 2" in f["evidence"]
    assert status.returncode == 1
    # the crash says why the log ends early: no second warning that it stopped "without an error"
    assert "incomplete" not in findings(report)


def test_threshold_flags_change_the_verdict(tmp_path):
    log = tmp_path / "share.log"
    log.write_text("".join(f"epoch: [1/1], global_step: {i}, loss: 1.0, reader_cost: 0.3 s, batch_cost: 0.5 s\n"
                           for i in range(1, 40)))
    report, _ = analyze(log)
    assert abs(findings(report)["data_loading_bound"]["value"] - 0.6) < 1e-9
    report, _ = analyze(log, "--data-share", "0.7")
    assert "data_loading_bound" not in findings(report)
    result = run(["trainwatch", "analyze", "--data-share", "abc", log])
    assert result.returncode == 2 and "--data-share" in result.stderr


def test_text_output_colour_only_when_asked(tmp_path):
    log, _ = train(tmp_path, "--epochs", "1", "--steps-per-epoch", "20", "--log-interval", "5", "--slow-reader", "5")
    plain = run(["trainwatch", "analyze", log]).stdout
    assert "\x1b[" not in plain  # not a terminal
    assert "Summary" in plain and "WARNING  Data loading bound" in plain
    coloured = run(["trainwatch", "analyze", "--color=always", log]).stdout
    assert "\x1b[33m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_json_schema_is_versioned(tmp_path):
    log, _ = train(tmp_path, "--epochs", "1", "--steps-per-epoch", "20", "--log-interval", "5")
    report, _ = analyze(log)
    assert report["schema"] == "trainwatch.analysis/2"
    for key in ["healthy", "inputs", "summary", "findings"]:
        assert key in report
    for key in ["step_records", "first_step", "last_step", "duration_seconds", "step_time_p50", "data_share",
                "final_loss", "best_loss", "eval_metrics", "event_counts"]:
        assert key in report["summary"]


def test_records_round_trip_through_the_trainwatch_format(tmp_path):
    log, _ = train(tmp_path, "--epochs", "2", "--steps-per-epoch", "30", "--log-interval", "5", "--lr-spike-at", "40")
    recs = run(["trainwatch", "analyze", "--records", log]).stdout
    (tmp_path / "records.jsonl").write_text(recs)
    direct, _ = analyze(log)
    again, _ = analyze(tmp_path / "records.jsonl")
    assert again["inputs"][0]["format"] == "trainwatch"
    assert direct["summary"] == again["summary"]
    assert [(f["rule"], f["line"], f["file"]) for f in direct["findings"]] == \
           [(f["rule"], f["line"], f["file"]) for f in again["findings"]]


def test_several_files_become_ranks(tmp_path):
    logs = []
    for rank, slow in enumerate(["5", "5", "30"]):
        log = tmp_path / f"workerlog.{rank}"
        run(["demo-train", "--log", log, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "30",
             "--log-interval", "5", "--slow-reader", slow], timeout=120)
        logs.append(log)
    report, _ = analyze(*logs, "--data-share", "0.99")
    assert report["summary"]["ranks"] == 3
    f = findings(report)["straggler"]
    assert f["rank"] == 2


def kv_log(path, steps=60, loss=lambda i: 2.0 / (1 + i / 10), extra=""):
    path.write_text("".join(f"step: {i}, loss: {loss(i)}, lr: 0.1, batch_cost: 0.5{extra}\n" for i in range(1, steps + 1)))
    return path


def test_large_rank_numbers_from_file_names_stay_apart(tmp_path):
    """workerlog.5000 and workerlog.7000 are two healthy ranks, not rank 1023
    restarting with loss spikes."""
    a = kv_log(tmp_path / "workerlog.5000")
    b = kv_log(tmp_path / "workerlog.7000")
    report, status = analyze(a, b)
    assert report["summary"]["ranks"] == 2
    assert report["healthy"], [f["title"] for f in report["findings"]]
    assert status.returncode == 0
    text = run(["trainwatch", "analyze", a, b]).stdout
    assert "1023" not in text and "restart" not in text


def test_json_unknown_numbers_are_null_not_zero(tmp_path):
    """A log that prints no memory, no epochs, no step times or timestamps:
    those numbers are null (docs/analysis-json.md), and a finding tied to no
    step has step null."""
    log = tmp_path / "bare.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   "ImportError: no module named x\n" +
                   "".join(f"step: {i}, loss: {2.0 / i}\n" for i in range(1, 40)))
    report, _ = analyze(log)
    s = report["summary"]
    for key in ["peak_memory_bytes", "step_time_max", "step_time_p50", "duration_seconds", "duration_source",
                "last_epoch", "epoch_total", "samples_per_second", "data_share"]:
        assert s[key] is None, key
    assert s["first_step"] == 1 and s["best_loss_step"] == 39
    untied = [f for f in report["findings"] if f["step"] is None]
    assert untied, [(f["rule"], f["step"]) for f in report["findings"]]
    for f in report["findings"]:
        assert f["step"] != -1 and f["rank"] != -1 and f["line"] != 0
    text = run(["trainwatch", "analyze", log]).stdout
    assert "device memory" not in text and "duration" not in text


def test_huge_loss_is_written_short(tmp_path):
    log = kv_log(tmp_path / "huge.log", loss=lambda i: "1e308" if i == 45 else 1.5)
    out = run(["trainwatch", "analyze", "--json", log]).stdout
    assert not re.search(r"\d{30}", out), re.search(r".{40}\d{30}", out).group(0)
    report = json.loads(out)
    spike = findings(report)["loss_spikes"]
    assert "6.67e+307x" in spike["title"] and spike["value"] == 1e308 / 1.5
    assert not re.search(r"\d{30}", run(["trainwatch", "analyze", log]).stdout)


def test_train_metric_best_is_over_every_record(tmp_path):
    log = tmp_path / "parts.log"
    log.write_text("".join(f"step: {i}, loss: 1.0, loss_ce: {0.2 if i == 7 else 0.9}, lr: 0.1\n" for i in range(1, 21)))
    report, _ = analyze(log)
    part = {m["name"]: m for m in report["summary"]["train_metrics"]}["loss_ce"]
    assert (part["last"], part["best"], part["best_step"], part["count"]) == (0.9, 0.2, 7, 20)


def test_one_severity_word_in_text_json_and_docs(tmp_path):
    log = kv_log(tmp_path / "flat.log", loss=lambda i: 1.5 if i != 45 else 9.0)  # plateau + spike
    report, _ = analyze(log)
    severities = {f["severity"] for f in report["findings"]}
    assert severities == {"warning", "info"}
    text = run(["trainwatch", "analyze", log]).stdout
    labels = re.findall(r"^  (\w+) +.*\[(\w+)\]$", text, re.M)
    assert labels == [(f["severity"].upper(), f["rule"]) for f in report["findings"]]
    rules = (SOURCE / "docs" / "analyze.md").read_text().split("## What it diagnoses", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `\w+`(?: / `\w+`)? \| (\w+) \|", rules, re.M)
    assert len(table) > 20 and set(table) == {"error", "warning", "info"}


def test_fail_on_severity_sets_the_exit_status(tmp_path):
    warn = kv_log(tmp_path / "flat.log", loss=lambda i: 1.5)  # plateau: a warning
    info = kv_log(tmp_path / "spiky.log", loss=lambda i: 9.0 if i == 45 else 2.0 / (1 + i / 10))  # a spike: info
    assert run(["trainwatch", "analyze", warn]).returncode == 0
    assert run(["trainwatch", "analyze", "--fail-on", "error", warn]).returncode == 0
    assert run(["trainwatch", "analyze", "--fail-on", "warning", warn]).returncode == 1
    assert run(["trainwatch", "analyze", "--fail-on=warning", info]).returncode == 0
    assert run(["trainwatch", "analyze", "--fail-on", "info", "--json", info]).returncode == 1
    bad = run(["trainwatch", "analyze", "--fail-on", "note", info])
    assert bad.returncode == 2 and "--fail-on" in bad.stderr


@pytest.mark.parametrize("how", [["analyze", "--help"], ["analyze", "-h"], ["help", "analyze"]])
def test_analyze_help_is_the_full_help(how):
    result = run(["trainwatch", *how])
    assert result.returncode == 0 and result.stderr == ""
    for flag in ["--format NAME", "--json", "--records", "--fail-on SEVERITY", "--color=WHEN", "--no-color", "--jobs N",
                 "--block-size BYTES", "--data-share F", "--early-stop F", "--device-memory GIB", "exit status:"]:
        assert flag in result.stdout, flag
    assert result.stdout == run(["trainwatch", "analyze", "--help"]).stdout


@pytest.mark.parametrize("mode", [["--json"], [], ["--records"], ["--help"]])
def test_write_error_on_stdout_is_an_error(tmp_path, mode):
    log = kv_log(tmp_path / "train.log")
    with open("/dev/full", "w") as full:
        result = subprocess.run([binary("trainwatch"), "analyze", *mode, str(log)], stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "standard output" in lines[0] and "No space left on device" in lines[0], lines


def test_write_error_names_its_cause_whatever_the_reports_size(tmp_path):
    """A report whose last write fails with nothing left to flush (its size
    lands on stdio's buffer) still says why: the path's length moves the
    JSON report's size across a 4 KiB boundary."""
    import tempfile
    base = pathlib.Path(tempfile.mkdtemp(dir="/tmp"))  # short, so the lengths below cross a boundary
    for n in range(1, 200):
        folder = base / ("x" * n)
        folder.mkdir()
        log = kv_log(folder / "train.log")
        with open("/dev/full", "w") as full:
            r = subprocess.run([binary("trainwatch"), "analyze", "--no-history", "--json", str(log)], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60)
        assert r.returncode == 2 and "No space left on device" in r.stderr, (n, r.stderr)
    shutil.rmtree(base)
