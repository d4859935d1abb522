"""Fields that do not mean what their names say: a "time" that is the time
since the start (a running total), and a printed step time that the log's
own timestamps contradict. The logs are produced here by Python logging code
that makes the mistake (no public log with it was found)."""
import subprocess
import sys

from conftest import analyze_json

SCRIPT = r'''
import logging, sys, time
logging.basicConfig(filename=sys.argv[1], level=logging.INFO,
                    format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
log = logging.getLogger("train")
start = time.time()
for step in range(1, int(sys.argv[2]) + 1):
    time.sleep(float(sys.argv[3]))
    printed = time.time() - start if sys.argv[4] == "total" else float(sys.argv[4])
    log.info("epoch: 1, step: %d, loss: %.4f, lr: 0.100000, time: %.4f", step, 2.0 / step ** 0.5, printed)
'''


def produce(tmp_path, records, pause, printed):
    log = tmp_path / "train.log"
    subprocess.run([sys.executable, "-c", SCRIPT, str(log), str(records), str(pause), printed], check=True)
    return log


def test_a_time_field_that_only_grows_is_a_running_total(tmp_path):
    report, _ = analyze_json(produce(tmp_path, 40, 0.02, "total"))
    (f,) = [f for f in report["findings"] if f["rule"] == "cumulative_time"]
    assert f["title"] == "Rank 0's step-time field is a running total: step times are its differences"
    assert f["step"] == 11  # decided at the tenth rise
    # step times are the differences (about 20 ms), not the total (up to about 0.8 s)
    assert 0.015 < report["summary"]["step_time_p50"] < 0.2
    assert report["summary"]["step_time_max"] < 0.5
    assert "step_time_mismatch" not in {g["rule"] for g in report["findings"]}


def test_a_per_step_time_is_not_a_running_total(tmp_path):
    report, _ = analyze_json(produce(tmp_path, 40, 0.02, "0.0200"))
    assert not {"cumulative_time", "step_time_mismatch"} & {f["rule"] for f in report["findings"]}


def test_a_printed_step_time_the_timestamps_contradict(tmp_path):
    """It prints 0.5 s a step while its records come every 20 ms."""
    report, _ = analyze_json(produce(tmp_path, 40, 0.02, "0.5000"))
    (f,) = [f for f in report["findings"] if f["rule"] == "step_time_mismatch"]
    assert f["severity"] == "warning" and f["value"] > 3
    assert "median printed step time 500ms" in f["evidence"]


def test_no_corpus_log_gets_these_findings(corpus):
    import json
    import pathlib
    expectations = json.loads((pathlib.Path(__file__).parent / "corpus_expectations.json").read_text())
    for name in expectations:
        if name.startswith(("_", "gpu/", "traces/")):
            continue
        report, _ = analyze_json("--launch", "all", corpus / name)
        assert not {f["rule"] for f in report["findings"]} & {"cumulative_time", "step_time_mismatch"}, name
