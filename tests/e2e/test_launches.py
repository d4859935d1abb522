"""A log that holds several launches (a restarted job, attempts while
debugging) is read launch by launch: the split, each launch's own
statistics and findings, the launches table, --launch, and the JSON
launches array. Real logs from ../shared/corpus (see its SOURCES.md); the
corpus is never copied here."""
from conftest import analyze_json, run

RTDETR = "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog.0"
AGCN = "paddle-suites/paddlevideo-agcn-ansi-color-workerlog.0"
VINVL = "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0"


def test_two_launches_each_with_its_own_crash(corpus):
    """PaddleDetection RT-DETR on 2 GPUs, started twice (init nccl context at
    lines 14 and 120): each launch died of its own DataLoader error."""
    report, result = analyze_json(corpus / RTDETR)
    assert report["schema"] == "trainwatch.analysis/2"
    assert report["launch"] == 2 and report["launch_count"] == 2
    first, last = report["launches"]
    assert (first["start_line"], last["start_line"], last["start"]) == (None, 120, "start line")
    assert (first["first_step"], first["last_step"], first["step_records"]) == (0, 432, 4)
    assert (last["first_step"], last["last_step"], last["step_records"]) == (0, 664, 6)
    assert first["outcome"] == "crashed" and "DataLoader 2 workers exit unexpectedly" in first["outcome_detail"]
    assert last["outcome"] == "crashed" and last["outcome_detail"].startswith("SystemError: (Fatal) DataLoader")
    # the report is the last launch's: its summary, its crash, and the earlier failure as a warning
    assert report["summary"]["step_records"] == 6 and report["summary"]["first_step"] == 0
    crash = [f for f in report["findings"] if f["rule"] == "crash"]
    assert len(crash) == 1 and crash[0]["launch"] == 2 and crash[0]["line"] == 282
    failed = [f for f in report["findings"] if f["rule"] == "failed_launches"]
    assert failed and failed[0]["launch"] is None and "launch 1: crashed: RuntimeError" in failed[0]["evidence"]
    assert result.returncode == 1


def test_launch_option_selects_one_or_all(corpus):
    one, _ = analyze_json(corpus / RTDETR, "--launch", "1")
    assert one["launch"] == 1 and one["summary"]["last_step"] == 432
    assert [f["launch"] for f in one["findings"]] == [1] * len(one["findings"])
    assert "failed_launches" not in {f["rule"] for f in one["findings"]}
    every, _ = analyze_json(corpus / RTDETR, "--launch", "all")
    assert every["launch"] == "all"
    assert {f["launch"] for f in every["findings"] if f["rule"] == "crash"} == {1, 2}
    bad = run(["trainwatch", "analyze", "--launch", "3", corpus / RTDETR])
    assert bad.returncode == 2 and "the log holds 2 launches" in bad.stderr
    assert run(["trainwatch", "analyze", "--launch", "zero", corpus / RTDETR]).returncode == 2


def test_launches_table_puts_the_last_first(corpus):
    text = run(["trainwatch", "analyze", "--no-color", corpus / AGCN]).stdout
    assert "Launches  6 in this log, the last first" in text
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("  #")]
    assert rows == ["#6", "#5", "#4", "#3", "#2", "#1"]
    assert "Summary of launch 6 of 6" in text


def test_a_finished_launch_is_not_failed_by_an_earlier_one(corpus):
    """PaddleVideo AGCN: the first launch crashed (train_data.npy missing),
    the last one trained on device 1 and finished: no error, a warning."""
    report, result = analyze_json(corpus / AGCN)
    assert report["launches"][-1]["outcome"] == "finished"
    assert report["launches"][-1]["start_line"] == 1973  # 16 hours after the one before
    assert report["launches"][0]["outcome"] == "crashed"
    assert not any(f["severity"] == "error" for f in report["findings"])
    assert result.returncode == 0


def test_one_launch_healthy_run_gets_nothing_new(corpus):
    report, result = analyze_json(corpus / VINVL)
    assert report["launch_count"] == 1 and report["launches"][0]["start"] == "log"
    assert not {f["rule"] for f in report["findings"]} & {"restarts", "failed_launches"}
    assert report["healthy"] and result.returncode == 0
    text = run(["trainwatch", "analyze", "--no-color", corpus / VINVL]).stdout
    assert "Launches" not in text


def test_launches_of_two_ranks_line_up(corpus):
    """Rank 1 of the same job logs no steps; its two launches are launch 1
    and 2 of the job, each ended by a SIGTERM."""
    report, _ = analyze_json(corpus / RTDETR, corpus / "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog.1")
    assert report["launch_count"] == 2
    assert [la["ranks"] for la in report["launches"]] == [1, 1]
    first = report["launches"][0]
    assert first["last_time"] > first["first_time"]  # ranks read one after another: the extremes


def test_launches_past_the_limit_are_said(tmp_path):
    """A log restarted more often than launches are kept apart: the last ones
    are analysed as one launch, and the report says so."""
    log = tmp_path / "restarts.log"
    launch = "".join(f"epoch: [1/1], global_step: {i}, lr: 0.1, loss: 1.0\n" for i in range(1, 4))
    log.write_text("".join("----------- Configuration Arguments -----------\n" + launch for _ in range(70)))
    report, _ = analyze_json(log)
    assert report["launch_count"] == 64
    over = [f for f in report["findings"] if f["rule"] == "launches_over_limit"]
    assert len(over) == 1 and "later ones are analysed together with launch 64" in over[0]["title"], over
