"""Every log in ../shared/corpus is parsed and diagnosed; what must (and must
not) come out is written in corpus_expectations.json, one readable entry per
file. The corpus is never copied here: tests skip when it is absent."""
import json
import math
import pathlib

import pytest

from conftest import CORPUS, analyze_json, records, run

EXPECTED = json.loads((pathlib.Path(__file__).parent / "corpus_expectations.json").read_text())
FILES = sorted(k for k in EXPECTED if not k.startswith("_"))


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9)


def test_every_corpus_log_has_expectations(corpus):
    logs = sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*")
                  if p.is_file() and p.name != "SOURCES.md" and not p.name.endswith(".gz"))
    assert logs == FILES, "a corpus file without expectations (or an expectation without its file)"


def assert_unknown_is_null(report):
    """docs/analysis-json.md: an unknown number is null, never -1 or 0; a
    quantile never lies outside the observed maximum."""
    s = report["summary"]
    for key in ["first_step", "last_step", "last_epoch", "epoch_total", "best_loss_step"]:
        assert s[key] is None or s[key] >= 0, key
    assert s["peak_memory_bytes"] != 0 and s["duration_seconds"] != 0
    for key in ["step_time_p50", "step_time_p95", "step_time_p99"]:
        assert (s[key] is None) == (s["step_time_max"] is None)
        assert s[key] is None or s[key] <= s["step_time_max"], key
    for m in s["train_metrics"] + s["eval_metrics"]:
        assert m["best_step"] is None or m["best_step"] >= 0
    for f in report["findings"]:
        assert f["rank"] != -1 and f["step"] != -1 and f["line"] != 0, f["rule"]
        assert f["severity"] in ("error", "warning", "info")


@pytest.mark.parametrize("name", FILES)
def test_corpus_file(corpus, name):
    want = EXPECTED[name]
    path = corpus / name
    if want.get("no_training_records"):
        result = run(["trainwatch", "analyze", "--json", path])
        assert result.returncode == 2
        assert "no training records recognised" in result.stderr
        assert str(path) in result.stderr
        return
    report, result = analyze_json(path)
    summary = report["summary"]  # of the last launch
    assert_unknown_is_null(report)
    assert report["inputs"][0]["format"] == want["format"]
    # counts are the log's: every launch's together
    launches = report["launches"]
    assert sum(la["summary"]["step_records"] for la in launches) == want["step_records"]
    if "eval_records" in want:
        assert sum(la["summary"]["eval_records"] for la in launches) == want["eval_records"]
    if "first_step" in want:
        assert (summary["first_step"], summary["last_step"]) == (want["first_step"], want["last_step"])
    for kind, count in want.get("events", {}).items():
        assert sum(la["summary"]["event_counts"][kind] for la in launches) == count, kind
    outcomes = [(la["start_line"], la["step_records"], la["outcome"]) for la in launches]
    assert outcomes == [tuple(o) for o in want.get("launches", [[None, want["step_records"], outcomes[0][2]]])]
    rules = [f["rule"] for f in report["findings"]]
    for rule in want.get("findings", []):
        assert rule in rules, f"{rule} missing; got {rules}"
    for rule in want.get("not_findings", []):
        assert rule not in rules, f"{rule} must not be reported"
    if want.get("healthy"):
        assert report["healthy"], [f["title"] for f in report["findings"]]
        assert result.returncode == 0
    has_error = any(f["severity"] == "error" for f in report["findings"])
    assert result.returncode == (1 if has_error else 0)
    for rule, line in want.get("finding_lines", {}).items():
        found = [f for f in report["findings"] if f["rule"] == rule]
        assert found and found[0]["line"] == line and found[0]["file"] == str(path)
    evals = {m["name"]: m for m in summary["eval_metrics"]}
    for metric, value in want.get("eval_last", {}).items():
        assert close(evals[metric]["last"], value), metric
    for metric, value in want.get("eval_best", {}).items():
        assert close(evals[metric]["best"], value), metric


@pytest.mark.parametrize("name", [n for n in FILES if EXPECTED[n].get("loss_at")])
def test_corpus_loss_at_lines(corpus, name):
    recs, _ = records(corpus / name)
    steps = {}
    for r in recs:  # the first record of a line (progress bars may put two on one)
        if r["kind"] == "step":
            steps.setdefault(r["line"], r)
    for line, loss in EXPECTED[name]["loss_at"]:
        assert line in steps, f"no step record at line {line}"
        assert close(steps[line]["loss"], loss), (line, steps[line]["loss"], loss)


def test_vinvl_ranks_together_are_one_healthy_run(corpus):
    report, result = analyze_json(corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0",
                                  corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.3")
    assert report["summary"]["ranks"] == 2
    rules = {f["rule"] for f in report["findings"]}
    assert not rules & {"straggler", "rank_stopped", "stall", "restarts"}
    assert result.returncode == 0


def test_hapi_duration_without_timestamps_is_steps_times_step_time(corpus):
    """60 epochs of 7 steps at about 0.59 s a step: about four minutes, not
    the 35 s of one step time per logged record; and said to be an estimate."""
    path = corpus / "paddle-hapi/hapi-landmark-fit-60epochs.txt"
    report, _ = analyze_json(path)
    s = report["summary"]
    assert s["duration_source"] == "estimated" and not s["duration_from_timestamps"]
    assert 420 * 0.57 < s["duration_seconds"] < 420 * 0.60
    assert s["step_time_p99"] <= s["step_time_max"] == 0.622
    text = run(["trainwatch", "analyze", path]).stdout
    assert "duration       4m0" in text and "(estimated from steps x step time)" in text


def test_gzipped_trace_is_not_a_log(corpus):
    result = run(["trainwatch", "analyze", corpus / "traces/hta-mi250-rocm-minitoy-train.kineto.json.gz"])
    assert result.returncode == 2
    assert "no training records recognised" in result.stderr


BIG_ENOUGH = 4 * 1024  # four blocks of 1 KiB: the file is read on threads


def same_lines(got, want):
    """None when equal, else the first line that differs (a short message:
    pytest's own diff of megabytes of text takes minutes)."""
    a, b = got.splitlines(), want.splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: {x[:300]!r} != {y[:300]!r}"
    return None if len(a) == len(b) else f"{len(a)} lines != {len(b)} lines"


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_read_in_blocks_is_read_alike(corpus, name):
    """Read on three threads in 1 KiB blocks, every corpus log gives the
    records and the report that one reader gives, line numbers included,
    detecting its format or told it."""
    path = corpus / name
    if path.stat().st_size < BIG_ENOUGH:
        pytest.skip(f"{name} is under {BIG_ENOUGH} bytes: always read in order")
    forced = ["--format", EXPECTED[name]["format"]] if EXPECTED[name].get("format") else []
    for mode in (["--records"], ["--json"], ["--records", *forced]):
        one = run(["trainwatch", "analyze", *mode, "--jobs", "1", path])
        many = run(["trainwatch", "analyze", *mode, "--jobs", "3", "--block-size", "1024", path])
        assert (many.returncode, many.stderr) == (one.returncode, one.stderr)
        assert same_lines(many.stdout, one.stdout) is None, (mode, same_lines(many.stdout, one.stdout))


def test_whole_corpus_as_one_file_read_in_blocks(corpus, tmp_path):
    """All the logs one after another: formats change mid-file and blocks
    start inside tracebacks, JSON documents and tables."""
    mixed = tmp_path / "mixed.log"
    with open(mixed, "wb") as out:
        for name in FILES:
            out.write((corpus / name).read_bytes())
    one = run(["trainwatch", "analyze", "--records", "--jobs", "1", mixed])
    assert one.returncode == 0 and one.stdout.count("\n") > 1000
    for block in ("1024", "10000", "65536"):
        many = run(["trainwatch", "analyze", "--records", "--jobs", "3", "--block-size", block, mixed])
        assert same_lines(many.stdout, one.stdout) is None, (block, same_lines(many.stdout, one.stdout))
