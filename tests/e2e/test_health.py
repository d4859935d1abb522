"""The 0-100 health score: in analyze's summary and JSON (with its
breakdown), per launch, and as trainwatch_health_score from run and watch.
The corpus test: every healthy corpus run (tests/e2e/corpus_expectations.json
says which) scores above every run with a problem."""
import json
import re
import subprocess

from conftest import SOURCE, analyze_json, binary, run
from servers import Pushgateway, free_port, http, wait_until

EXPECTATIONS = json.loads((SOURCE / "tests/e2e/corpus_expectations.json").read_text())
DATA_BOUND = "paddle-suites/paddlevideo-3dresnet18-ucf101-train.log"


def scored_runs(corpus):
    healthy, faulty = {}, {}
    for name, want in EXPECTATIONS.items():
        if not isinstance(want, dict) or want.get("no_training_records"):
            continue
        report, _ = analyze_json(corpus / name)
        if want.get("healthy"):
            assert report["healthy"], name
            healthy[name] = report["health"]["score"]
        elif not report["healthy"]:
            faulty[name] = report["health"]["score"]
    return healthy, faulty


def test_every_healthy_corpus_run_scores_above_every_faulty_one(corpus):
    healthy, faulty = scored_runs(corpus)
    assert len(healthy) >= 8 and len(faulty) >= 8
    assert min(healthy.values()) > max(faulty.values()), (healthy, faulty)
    assert all(90 <= s <= 100 for s in healthy.values()), healthy


def test_breakdown_adds_up(corpus):
    for name in (DATA_BOUND, "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog.0",
                 "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0"):
        report, _ = analyze_json(corpus / name)
        h = report["health"]
        assert sum(c["weight"] for c in h["components"]) == 100
        assert [c["name"] for c in h["components"]] == ["failures", "nan", "data_loading", "gpu_idle",
                                                        "stalls_jitter", "memory", "loss_trend", "rank_balance"]
        raw = 100 - sum(c["weight"] * c["penalty"] for c in h["components"])
        cap = {None: 100, "warning": 84, "error": 59}[h["cap"]]
        assert abs(h["score"] - round(min(raw, cap), 1)) < 0.051, name
        for launch in report["launches"]:
            assert 0 <= launch["health"]["score"] <= 100
    # the data-loading bound run: its share is the component's reason
    report, _ = analyze_json(corpus / DATA_BOUND)
    data = next(c for c in report["health"]["components"] if c["name"] == "data_loading")
    share = report["summary"]["data_share"]
    assert data["penalty"] == 1 and data["why"] == f"data wait {round(share * 100)}% of step time"
    crash, _ = analyze_json(corpus / "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog.0")
    failures = crash["health"]["components"][0]
    assert crash["health"]["cap"] == "error" and failures["why"] == "crash" and failures["penalty"] == 1


def test_summary_line(corpus):
    report, _ = analyze_json(corpus / DATA_BOUND)
    text = run(["trainwatch", "analyze", "--no-color", corpus / DATA_BOUND]).stdout
    line = next(l for l in text.splitlines() if l.startswith("  health "))
    assert line.split()[1] == f"{report['health']['score']:.0f}/100"
    assert "data_loading -10" in line and "capped at 84 by warning findings" in line


def test_run_exports_the_score_while_it_goes_and_at_the_end(corpus, tmp_path):
    """run serves trainwatch_health_score once the run has steps, the same
    score analyze gives the same log."""
    expected, _ = analyze_json(corpus / DATA_BOUND)
    port = free_port()
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", f"127.0.0.1:{port}", "--run-name", "h",
                             "--", "sh", "-c", f"cat {corpus / DATA_BOUND}; sleep 3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def score():
            status, _, body = http(f"http://127.0.0.1:{port}/metrics")
            m = re.search(r'^trainwatch_health_score\{run="h"\} (\S+)$', body.decode(), re.M)
            return m and float(m.group(1))
        live = wait_until(score, timeout=30, what="trainwatch_health_score")
        assert live == expected["health"]["score"]
    finally:
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_watch_reports_the_score_in_json(corpus, tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes((corpus / DATA_BOUND).read_bytes())
    result = run(["trainwatch", "watch", "--web.listen-address", "none", "--duration", "1", "--json", "--from-start",
                  log], timeout=60)
    report = json.loads(result.stdout)
    expected, _ = analyze_json(corpus / DATA_BOUND)
    assert report["health"]["score"] == expected["health"]["score"]


def test_pushgateway_gets_the_final_score(procs, corpus, tmp_path):
    gw = procs(Pushgateway, str(tmp_path))
    result = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "none", "--pushgateway", gw.url,
                             "--run-name", "h", "--", "cat", str(corpus / DATA_BOUND)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    m = re.search(r'^trainwatch_health_score\{[^}]*job="h"[^}]*\} (\S+)$', gw.metrics(), re.M)
    assert m, gw.metrics()[-2000:]
    final = float(m.group(1))
    assert 0 <= final <= 84  # the data-loading warning caps it


def test_per_rank_scores(corpus):
    """Each rank of the launch shown has its score: its own findings and data
    wait; a single-rank log's rank scores what the run scores."""
    report, _ = analyze_json(corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0",
                             corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.3")
    assert [r["rank"] for r in report["rank_health"]] == [0, 3]
    assert all(90 <= r["health"]["score"] <= 100 for r in report["rank_health"])
    one, _ = analyze_json(corpus / DATA_BOUND)
    assert [r["rank"] for r in one["rank_health"]] == [0]
    assert one["rank_health"][0]["health"] == one["health"]
    text = run(["trainwatch", "analyze", "--no-color", corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0",
                corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.3"]).stdout
    scores = "   ".join(f"{r['rank']}: {r['health']['score']:.0f}" for r in report["rank_health"])
    assert f"  health by rank {scores}\n" in text
