"""What a training script's own logging leaves in its log: records printed
twice (a logger given a handler twice) and records so frequent that logging
costs. The logs are produced here by running Python's logging the way the
mistake is made (no public log with it was found), then analysed."""
import subprocess
import sys

from conftest import analyze_json

SCRIPT = r'''
import logging, math, sys, time
log = logging.getLogger("train")
fmt = logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s")
for _ in range(int(sys.argv[2])):  # the mistake: a set-up helper called once per use
    handler = logging.FileHandler(sys.argv[1])
    handler.setFormatter(fmt)
    log.addHandler(handler)
log.setLevel(logging.INFO)
for step in range(1, int(sys.argv[3]) + 1):
    log.info("epoch: 1, step: %d, loss: %.4f, lr: 0.100000, batch_cost: 0.2100", step * 10, 2.0 / math.sqrt(step))
    time.sleep(float(sys.argv[4]))
'''


def produce(tmp_path, handlers, records, pause):
    log = tmp_path / "train.log"
    subprocess.run([sys.executable, "-c", SCRIPT, str(log), str(handlers), str(records), str(pause)], check=True)
    return log


def test_a_logger_with_two_handlers_is_said_and_counted_once(tmp_path):
    log = produce(tmp_path, 2, 50, 0)
    report, _ = analyze_json(log)
    (f,) = [f for f in report["findings"] if f["rule"] == "duplicated_logging"]
    assert f["severity"] == "warning" and f["rank"] == 0
    assert f["title"] == "Rank 0's records are printed 2.0 times each: the logging is duplicated"
    assert f["line"] == 2 and f["step"] == 10
    assert "50 of 100 step records repeat the record before them exactly" in f["evidence"]
    assert "log on rank 0 only" in f["recommendation"]
    assert report["summary"]["step_records"] == 50  # statistics count each record once


def test_three_handlers(tmp_path):
    report, _ = analyze_json(produce(tmp_path, 3, 20, 0))
    (f,) = [f for f in report["findings"] if f["rule"] == "duplicated_logging"]
    assert "printed 3.0 times each" in f["title"]
    assert report["summary"]["step_records"] == 20


def test_one_handler_is_not_duplicated(tmp_path):
    report, _ = analyze_json(produce(tmp_path, 1, 50, 0))
    assert "duplicated_logging" not in {f["rule"] for f in report["findings"]}
    assert report["summary"]["step_records"] == 50


def test_records_many_a_second_are_a_logging_cost(tmp_path):
    report, _ = analyze_json(produce(tmp_path, 1, 200, 0.002))
    (f,) = [f for f in report["findings"] if f["rule"] == "logging_cost"]
    assert f["severity"] == "info" and f["value"] > 10
    assert "200 step records in" in f["evidence"] and "one every 10.0 steps" in f["evidence"]
    assert "every 10-100 steps" in f["recommendation"]


def test_no_corpus_log_gets_these_findings(corpus):
    """The rules added with these (duplicated logging, logging cost, ranks on
    one GPU) find nothing in any log of the shared corpus: none of them
    shows these faults (each was read for it)."""
    import json
    import pathlib
    expectations = json.loads((pathlib.Path(__file__).parent / "corpus_expectations.json").read_text())
    for name in expectations:
        if name.startswith("_") or expectations[name].get("exit") == 2 or name.startswith(("gpu/", "traces/")):
            continue
        report, _ = analyze_json("--launch", "all", corpus / name)
        rules = {f["rule"] for f in report["findings"]}
        assert not rules & {"duplicated_logging", "logging_cost", "shared_device", "cut_off"}, (name, rules)


PPOCR = "paddle-suites/ppocr-det-drrg-workerlog.0.excerpt.log"


def cut_copy(corpus, tmp_path, nth_step_after):
    """A copy of a real PaddleOCR log that stops in the middle of a step
    record (as a copy taken while the log was written, or a killed writer,
    leaves it): returns the copy, the cut line and the step line before it."""
    lines = (corpus / PPOCR).read_bytes().split(b"\n")
    steps = [i for i, line in enumerate(lines) if b"global_step:" in line and i > 500]
    cut = steps[nth_step_after]
    text = b"\n".join(lines[:cut]) + b"\n" + lines[cut][:lines[cut].index(b"avg_batch_cost")]
    path = tmp_path / "cut.log"
    path.write_bytes(text)
    return path, cut + 1, steps[nth_step_after - 1] + 1


def test_a_log_cut_mid_record_is_said_with_the_last_complete_record(corpus, tmp_path):
    path, cut_line, before = cut_copy(corpus, tmp_path, 10)
    report, _ = analyze_json(path)
    (f,) = [f for f in report["findings"] if f["rule"] == "cut_off"]
    assert f["severity"] == "warning" and f["line"] == cut_line
    assert f["title"] == f"The log is cut off mid-record at line {cut_line}: the run or its log was interrupted"
    assert f"last complete record: step " in f["evidence"] and f"cut.log:{before})" in f["evidence"]


def test_a_complete_last_line_without_newline_is_not_cut(corpus):
    """PaddleVideo's log ends with "training Res18 finished" and no newline."""
    report, _ = analyze_json(corpus / "paddle-suites/paddlevideo-3dresnet18-ucf101-train.log")
    assert "cut_off" not in {f["rule"] for f in report["findings"]}
